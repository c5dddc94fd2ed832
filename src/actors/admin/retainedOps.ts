import { filterToSubscription, subjectToTopic } from "../../protocol/topic.js";
import { type AccountServices, RETAINED_PREFIX } from "../accountServices.js";
import { lastMessagesFor } from "../directLast.js";

/** At most this many retained messages in one `retained` reply. */
export const RETAINED_MAX = 1_000;

/**
 * The retained-stream subjects an MQTT topic filter covers (`a/#` is `a.>` and `a`), or
 * why the filter is not one. A shared subscription's filter names no retained message.
 */
export function retainedSubjects(filter: string): { ok: true; subjects: string[] } | { ok: false; error: string } {
  if (filter.startsWith("$share/"))
    return { ok: false, error: "a shared subscription's filter names no retained message" };
  const sub = filterToSubscription(filter);
  if (!sub.ok) return { ok: false, error: `filter ${JSON.stringify(filter)}: ${sub.error}` };
  return { ok: true, subjects: sub.value.subjects.map((s) => `${RETAINED_PREFIX}${s}`) };
}

/** `retained`: the retained messages under a topic filter (all: `#`), by topic, with size and time. */
export async function retainedReply(
  services: AccountServices,
  id: string,
  account: string,
  subjects: readonly string[],
): Promise<object> {
  const { name, handles } = await services.retainedStream(account);
  // The stream's own count per subject first (one subject each: max_msgs_per_subject 1).
  const found = new Set<string>();
  for (const filter of subjects) {
    const info = await handles.jsm.streams.info(name, { subjects_filter: filter });
    for (const s of Object.keys(info.state.subjects ?? {})) found.add(s);
  }
  const wanted = [...found].sort().slice(0, RETAINED_MAX);
  const retained: Array<{ topic: string; subject: string; bytes: number; time: string }> = [];
  if (wanted.length > 0) {
    // A batch ends with a 404 once a subject has gone meanwhile: what came is the answer.
    const { messages } = await lastMessagesFor(handles.jsm, name, wanted, { batch: wanted.length });
    for (const m of messages) {
      const subject = m.subject.slice(RETAINED_PREFIX.length);
      retained.push({
        topic: subjectToTopic(subject) ?? subject,
        subject,
        bytes: m.data.byteLength,
        time: m.time.toISOString(),
      });
    }
  }
  retained.sort((a, b) => a.topic.localeCompare(b.topic));
  return { id, account, retained, count: found.size, truncated: retained.length < found.size };
}

/** `retained.clear`: purges the retained messages under a topic filter; how many went. */
export async function retainedClearReply(
  services: AccountServices,
  id: string,
  account: string,
  subjects: readonly string[],
): Promise<object> {
  const { name, handles } = await services.retainedStream(account);
  let cleared = 0;
  for (const filter of subjects) cleared += (await handles.jsm.streams.purge(name, { filter })).purged;
  return { id, account, cleared };
}
