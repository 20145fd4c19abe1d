// The client scenario of tests/jmap/test_client_scenarios.py, driven by jmap-jam
// (an npm JMAP client): create a mailbox, upload and import a message into it,
// query with a filter and a sort, write a draft, move the message, destroy.
// Prints what it observed as one JSON object; the Python test checks it.
//
//   node scenario.mjs SESSION_URL TOKEN MESSAGE_FILE
import { readFile } from "node:fs/promises";
import JamClient from "jmap-jam";

const [sessionUrl, bearerToken, messageFile] = process.argv.slice(2);
const jam = new JamClient({ sessionUrl, bearerToken });
const accountId = await jam.getPrimaryAccount();
const seen = {};

const [mailboxes] = await jam.api.Mailbox.get({ accountId, ids: null });
const role = (name) => mailboxes.list.find((box) => box.role === name).id;

const [made] = await jam.api.Mailbox.set({
  accountId,
  create: { projects: { name: "Projects", parentId: null, sortOrder: 5 } },
});
const projects = made.created.projects.id;

const raw = await readFile(messageFile);
const upload = await jam.uploadBlob(accountId, new Blob([raw], { type: "message/rfc822" }));
seen.uploadSize = upload.size;
const [imported] = await jam.api.Email.import({
  accountId,
  emails: {
    one: {
      blobId: upload.blobId,
      mailboxIds: { [projects]: true },
      keywords: { $seen: true, $forwarded: true },
      receivedAt: "2024-05-01T10:00:00Z",
    },
  },
});
const emailId = imported.created.one.id;

const [{ found, emails }] = await jam.requestMany((t) => {
  const found = t.Email.query({
    accountId,
    filter: { operator: "AND", conditions: [{ inMailbox: projects }, { from: "walrus" }] },
    sort: [{ property: "subject", isAscending: true }],
    calculateTotal: true,
  });
  const emails = t.Email.get({
    accountId,
    ids: found.$ref("/ids"),
    properties: ["subject", "keywords", "mailboxIds", "receivedAt"],
  });
  return { found, emails };
});
seen.foundIds = found.ids;
seen.foundTotal = found.total;
seen.foundIsImported = found.ids[0] === emailId;
seen.imported = emails.list[0];

const [identities] = await jam.api.Identity.get({ accountId, ids: null });
const [drafted] = await jam.api.Email.set({
  accountId,
  create: {
    draft: {
      mailboxIds: { [role("drafts")]: true },
      keywords: { $draft: true, $seen: true },
      from: [{ name: "Alice", email: identities.list[0].email }],
      to: [{ name: "Walrus", email: "walrus@example.net" }],
      subject: "Re: Fish supply",
      inReplyTo: null,
      textBody: [{ partId: "t", type: "text/plain" }],
      bodyValues: { t: { value: "More fish, please." } },
    },
  },
});
const draftId = drafted.created.draft.id;
const [draftGot] = await jam.api.Email.get({
  accountId,
  ids: [draftId],
  properties: ["subject", "keywords", "mailboxIds"],
  fetchTextBodyValues: true,
});
seen.draft = draftGot.list[0];

const [moved] = await jam.api.Email.set({
  accountId,
  update: { [emailId]: { mailboxIds: { [role("inbox")]: true } } },
});
seen.movedUpdated = Object.keys(moved.updated ?? {});
const [afterMove] = await jam.api.Email.get({ accountId, ids: [emailId], properties: ["mailboxIds"] });
seen.mailboxIdsAfterMove = afterMove.list[0].mailboxIds;

const [gone] = await jam.api.Email.set({ accountId, destroy: [draftId] });
const [boxGone] = await jam.api.Mailbox.set({ accountId, destroy: [projects] });
seen.destroyed = { emails: gone.destroyed, mailboxes: boxGone.destroyed };
const [afterDestroy] = await jam.api.Email.get({ accountId, ids: [draftId] });
seen.draftNotFound = afterDestroy.notFound;
seen.ids = { projects, emailId, draftId, inbox: role("inbox"), drafts: role("drafts") };

console.log(JSON.stringify(seen));
