"""Mail providers: IMAP, Gmail, Microsoft Graph and local files behind one interface."""
