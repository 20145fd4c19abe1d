"""The web page's endpoints: plain ``def`` functions, run in Starlette's thread pool.

Blocking database work inside ``async def`` would stall every request of the
server, so no page endpoint here is async. ``common`` holds what they share
(templates, the CSP, the signed-in guard, form reading), ``layout`` the frame
of every signed-in page (top bar, sidebar, account filter); every other module
is one page or concept (``mailbox``, ``signin``, ``health``, ...).
"""
