"""The web page's endpoints: plain ``def`` functions, run in Starlette's thread pool.

Blocking database work inside ``async def`` would stall every request of the
server, so no page endpoint here is async. ``common`` holds what they share
(templates, the signed-in guard, form reading); ``signin``, ``mail`` and
``health`` are the pages.
"""
