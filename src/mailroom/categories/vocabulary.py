"""The words, domains and header names the cascade recognises, kept apart from its logic.

Everything here is data from how mail is actually sent: the domains social
networks notify from, the headers email service providers (ESPs) and list
servers stamp, and the subject words of transactional and promotional mail
in English, German and French. The patterns are anchored or bounded, so no
subject or header value can make them backtrack badly.
"""

from __future__ import annotations

import re

# Sender domains of social networks and community platforms (a subdomain counts too).
SOCIAL_DOMAINS = frozenset(
    {
        "facebookmail.com",
        "facebook.com",
        "linkedin.com",
        "twitter.com",
        "x.com",
        "instagram.com",
        "threads.net",
        "pinterest.com",
        "tiktok.com",
        "reddit.com",
        "redditmail.com",
        "xing.com",
        "meetup.com",
        "quora.com",
        "youtube.com",
        "snapchat.com",
        "discord.com",
        "tumblr.com",
        "nextdoor.com",
        "strava.com",
        "goodreads.com",
        "twitch.tv",
        "bsky.app",
        "bsky.social",
        "vk.com",
        "flickr.com",
        "deviantart.com",
        "letterboxd.com",
        "untappd.com",
        "komoot.com",
        "komoot.de",
        "couchsurfing.com",
        "ello.co",
        "myspace.com",
        "mewe.com",
        "telegram.org",
        "whatsapp.com",
        "signal.org",
        "lnkd.in",
        # Large Mastodon and Fediverse instances (their mail comes from the instance's domain).
        "mastodon.social",
        "mastodon.online",
        "mastodon.world",
        "mstdn.social",
        "fosstodon.org",
        "hachyderm.io",
        "infosec.exchange",
        "chaos.social",
        "social.vivaldi.net",
        "mas.to",
        "troet.cafe",
        "norden.social",
        "mastodon.art",
        "techhub.social",
        "pixelfed.social",
        "lemmy.world",
    }
)

# Headers that only social networks' notification systems stamp.
SOCIAL_HEADERS = ("x-linkedin-class", "x-facebook-notify", "x-twitter-recipient")

# Headers only discussion lists carry (people post to them); List-Id is weighed separately.
FORUM_HEADERS = (
    "list-post",
    "mailing-list",
    "x-mailing-list",
    "x-mailman-version",
    "x-beenthere",
    "x-google-group-id",
    "x-discourse-topic-id",
    "x-discourse-post-id",
    "x-github-reason",
    "x-gitlab-project",
    "list-software",
    "x-sympa-to",
)

# Headers an ESP or a campaign tool stamps on what it sends (names, lower-case).
ESP_HEADERS = (
    "x-campaign",
    "x-campaignid",
    "x-mc-user",
    "x-sg-eid",
    "x-csa-complaints",
    "x-mailgun-sid",
    "x-mailgun-tag",
    "x-mailgun-sending-ip",
    "x-ses-outgoing",
    "x-sfmc-stack",
    "x-hs-cid",
    "x-kmail-relay",
    "x-roving-id",
    "x-job",
    "feedback-id",
)

# Mass mailers, as they name themselves in X-Mailer or in a List-Id value (lower-case
# substrings: plain ``in`` tests are several times faster than one big pattern here).
MASS_MAILERS = (
    "mailchimp",
    "mcsv.net",
    "sendgrid",
    "constantcontact",
    "constant contact",
    "exacttarget",
    "campaign",
    "newsletter",
    "marketo",
    "hubspot",
    "klaviyo",
    "rsgsv",
    "cmail",
    "mktomail",
    "accucast",
    "emarsys",
    "sendinblue",
    "brevo",
    "mailjet",
    "mailerlite",
    "convertkit",
    "beehiiv",
    "buttondown",
    "substack",
    "createsend",
    "silverpop",
    "responsys",
    "eloqua",
    "cheetahmail",
    "lyris",
    "listrak",
    "iterable",
    "braze",
    "customer.io",
    "omnisend",
    "cleverreach",
    "rapidmail",
    "mailpoet",
    "sailthru",
    "dotdigital",
    "selligent",
    "powermta",
    "ymlp",
    "aweber",
    "getresponse",
)


def names_mass_mailer(value: str) -> bool:
    """True when a header value names a mass mailer or newsletter service."""
    lowered = value.lower()
    return any(name in lowered for name in MASS_MAILERS)


# Local parts of addresses no person reads (the sender is a machine).
AUTOMATED_SENDER = re.compile(
    r"^(no-?reply|do-?not-?reply|donotreply|notifications?|notify|alerts?|mailer-daemon|"
    r"postmaster|bounces?|automated|auto-?confirm|rss|rssfeeds?|feeds?|mailrobot|robot|system)"
    r"(?![a-z])",
    re.I,
)

# Local parts of role addresses a company sends account mail from (not one person).
ROLE_SENDER = re.compile(
    r"^(no-?reply|do-?not-?reply|donotreply|notifications?|notify|alerts?|info|service|"
    r"services|support|account|accounts|security|billing|invoices?|receipts?|orders?|"
    r"shop|store|team|hello|mail|news|customer|kundenservice|rechnung|facture|commande|"
    r"bestellung|versand|versandbestaetigung|buchung\w{0,20}|confirmation|booking|"
    r"reservations?|tickets?|payments?|auto-?confirm|automated|status|shipment|"
    r"shipping|delivery|tracking|verify|verification|account-security-noreply)"
    r"(?![a-z])",
    re.I,
)

# Words of mail about the owner's own account, order, money or security.
TRANSACTIONAL_WORDS = re.compile(
    r"\b(receipts?|invoices?|order|orders|ordered|shipped|shipping|shipment|dispatched|"
    r"delivery|delivered|statement|password|verify|verification|security (?:alert|code)|"
    r"sign-?in|log-?in|confirm\w{0,6}|booking|reservation|ticket|tickets|payment|"
    r"refund|renewed|renewal|subscription|appointment|one-time|code|"
    r"rechnung|bestellung|bestellbestätigung|lieferung|versand\w{0,6}|versendet|"
    r"zustellung|paket|sendung|passwort|kennwort|bestätigung|buchung\w{0,12}|zahlung|"
    r"kontoauszug|termin|abbuchung|"
    r"facture|commande|livraison|livré|expédiée?|colis|mot de passe|réinitialisation|"
    r"réservation|rendez-vous|paiement|reçu|relevé)\b",
    re.I,
)

# Words of mail that wants to sell something.
PROMOTIONAL_WORDS = re.compile(
    r"(\b(sale|deals?|offers?|discount|coupon|promo\w{0,6}|save|free shipping|"
    r"black friday|cyber monday|limited[- ]time|exclusive|shop now|"
    r"angebote|sonderangebot\w{0,2}|rabatt\w{0,2}|gutschein\w{0,2}|aktion|reduziert|sparen|"
    r"soldes|promotion|offre\w{0,2}|réduction|remise|bon plan)\b|"
    r"\d{1,2} ?% ?(off|rabatt)|-\d{1,2} ?%)",
    re.I,
)

# An order, booking or ticket number: five or more digits, possibly with separators.
REFERENCE_NUMBER = re.compile(r"(?:#|\bn[°o]\.? ?|\bnr\.? ?)?\b\d[\d-]{4,}\d\b", re.I)

# Administrative senders of a list server (reminders, moderation and bounce notices).
LIST_ADMIN_SENDER = re.compile(
    r"(^mailman$|^majordomo$|^listserv$|-(owner|request|bounces|admin)$)", re.I
)

# A subject tag of a list ("[Spambayes] ..."), after any reply prefixes.
LIST_TAG = re.compile(r"^(?:(?:re|aw|fwd?|wg|tr|sv)\s?:\s*)*(\[[^\]\[]{2,40}\])", re.I)

# Subjects of out-of-office replies in English, German and French.
AUTO_REPLY_SUBJECT = re.compile(
    r"^(automatic reply|auto(?:matic)?[- ]?response|out of (?:the )?office|"
    r"abwesenheitsnotiz|automatische antwort|réponse automatique|absence)\b",
    re.I,
)
