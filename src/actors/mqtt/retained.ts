import { JetStreamError } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import { type AccountJetStream, type AccountServices, RETAINED_PREFIX } from "../accountServices.js";
import { lastMessagesFor } from "../directLast.js";

export interface RetainedMessage {
  readonly subject: string;
  readonly headers: Iterable<[string, string]> | undefined;
  readonly data: Uint8Array;
}

/**
 * Retained messages: one per subject in the account's retained stream, written by the
 * gateway only after NATS accepted the client's own publish (so no client stores what
 * it may not publish), read on subscribe only after NATS accepted the subscription.
 */
export class RetainedMessages {
  constructor(private readonly services: AccountServices) {}

  async store(account: string, subject: string, payload: Uint8Array, headers: MsgHdrs | undefined): Promise<void> {
    const { name, handles } = await this.services.retainedStream(account);
    if (payload.byteLength === 0) {
      // [MQTT-3.3.1-6] an empty retained payload removes the retained message.
      await handles.jsm.streams.purge(name, { filter: `${RETAINED_PREFIX}${subject}` });
      return;
    }
    await handles.js.publish(`${RETAINED_PREFIX}${subject}`, payload, headers ? { headers } : {});
  }

  /** The retained messages on the subjects subscriptions map to (wildcards allowed). */
  async matching(account: string, subjects: readonly string[]): Promise<RetainedMessage[]> {
    const { name, handles } = await this.services.retainedStream(account);
    const stored = subjects.map((s) => `${RETAINED_PREFIX}${s}`);
    try {
      return await lastOf(handles, name, stored);
    } catch (e) {
      if (statusOf(e) !== TOO_MANY_RESULTS) return [];
    }
    // More than one read answers (a dashboard's `plant/+/state` over a fleet): the subjects that
    // hold one, from the stream's subject counts, then theirs in reads of at most that many.
    const held = await subjectsHolding(handles, name, stored);
    const out: RetainedMessage[] = [];
    for (let i = 0; i < held.length; i += READ_MOST)
      out.push(...(await lastOf(handles, name, held.slice(i, i + READ_MOST))));
    return out;
  }
}

/** The subjects that hold a message among `subjects` (wildcards listed by the stream, nats.js paging). */
async function subjectsHolding(handles: AccountJetStream, stream: string, subjects: readonly string[]) {
  const held = new Set<string>();
  for (const s of subjects) {
    if (!isWildcard(s)) held.add(s);
    else {
      const { state } = await handles.jsm.streams.info(stream, { subjects_filter: s });
      for (const k of Object.keys(state.subjects ?? {})) held.add(k);
    }
  }
  return [...held];
}

/** nats-server answers a direct read of more last messages than this 413 Too Many Results. */
const READ_MOST = 1024;
const TOO_MANY_RESULTS = 413;
/** The batch ends with a 404 (nothing more): no error in the callback form the read takes, an error in the iterator form. */
const NO_RESULTS = 404;

/** The status a direct read answered with (nats.js's JetStreamStatusError, not exported), if it is one. */
function statusOf(e: unknown): number | undefined {
  const code = e instanceof JetStreamError ? (e as { code?: unknown }).code : undefined;
  return typeof code === "number" ? code : undefined;
}

const isWildcard = (subject: string) => subject.split(".").some((t) => t === "*" || t === ">");

/** The last message of each subject in one direct read; a 413 (too many for one read) is thrown. */
async function lastOf(
  handles: AccountJetStream,
  stream: string,
  subjects: readonly string[],
): Promise<RetainedMessage[]> {
  const { messages, error } = await lastMessagesFor(handles.jsm, stream, subjects);
  if (error) {
    const status = statusOf(error);
    if (status !== undefined && status !== NO_RESULTS) throw error;
  }
  return messages.map((m) => ({
    subject: m.subject.slice(RETAINED_PREFIX.length),
    headers: m.header ? pairs(m.header) : undefined,
    data: m.data,
  }));
}

function pairs(h: MsgHdrs): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const k of h.keys()) for (const v of h.values(k)) out.push([k, v]);
  return out;
}
