"""Encrypted backups of the store: ``mailroom backup create | verify | restore``.

``snapshot`` takes a consistent copy of the running store (SQLite ``VACUUM
INTO``, PostgreSQL ``pg_dump``), ``stream`` seals it in authenticated AES-GCM
chunks, ``archive`` is the file format (header, manifest, atomic rename),
``keys`` the backup key and ``operations`` the three commands' steps.
"""
