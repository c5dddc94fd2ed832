import type { MsgHdrs } from "@nats-io/transport-node";
import { type AccountServices, RETAINED_PREFIX } from "../accountServices.js";

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

  /** The retained messages on the subjects a subscription maps to (wildcards allowed). */
  async matching(account: string, subjects: readonly string[]): Promise<RetainedMessage[]> {
    const { name, handles } = await this.services.retainedStream(account);
    const out: RetainedMessage[] = [];
    let iter: AsyncIterable<{ subject: string; header?: MsgHdrs; data: Uint8Array }>;
    try {
      iter = await handles.jsm.direct.getLastMessagesFor(name, {
        multi_last: subjects.map((s) => `${RETAINED_PREFIX}${s}`),
      });
    } catch {
      return out;
    }
    try {
      for await (const m of iter) {
        out.push({
          subject: m.subject.slice(RETAINED_PREFIX.length),
          headers: m.header ? pairs(m.header) : undefined,
          data: m.data,
        });
      }
    } catch {
      // No retained message matched: the batch ends with a 404 the iterator reports as an error.
    }
    return out;
  }
}

function pairs(h: MsgHdrs): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const k of h.keys()) for (const v of h.values(k)) out.push([k, v]);
  return out;
}
