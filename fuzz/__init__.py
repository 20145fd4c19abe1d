"""Fuzz harnesses: ``python -m fuzz.mime``, ``fuzz.fetch``, ``fuzz.jmap_request``; ``make fuzz``.

Each harness has a ``check(data: bytes)`` that raises only when the code
under test breaks its documented contract; ``fuzz.runner`` drives it with
atheris (coverage-guided, libFuzzer) when atheris is installed, else with a
plain random-mutation loop. Seeds are in ``fuzz/corpus/<name>/``; inputs
that once broke a contract are kept in ``fuzz/crashes/<name>/`` and replayed
by ``tests/fuzz`` (which needs no atheris).
"""
