"""Faithful local emulators of the provider REST APIs mailroom talks to (real HTTP on 127.0.0.1)."""
