import type { JetStreamManager } from "@nats-io/jetstream";

/** Names of the consumers on the MQTT store (MQGW_MSGS), those reading a subject that contains `under` when given (names carry no client id). */
export async function storeConsumers(jsm: JetStreamManager, under?: string): Promise<string[]> {
  const names: string[] = [];
  for await (const c of jsm.consumers.list("MQGW_MSGS")) {
    const filters = c.config.filter_subjects ?? (c.config.filter_subject ? [c.config.filter_subject] : []);
    if (under === undefined || filters.some((f) => f.includes(under))) names.push(c.name);
  }
  return names;
}
