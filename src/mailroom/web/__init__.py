"""The small server-rendered web page."""
