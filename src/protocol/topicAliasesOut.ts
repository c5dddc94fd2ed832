/**
 * Topic aliases the gateway assigns on one connection to an MQTT 5 client that allows
 * them (its CONNECT's Topic Alias Maximum > 0). The least recently used alias is rebound
 * when all are taken (docs/decisions/topic-aliases.md).
 */

/**
 * Aliases are worth it from this topic length: binding one costs 3 bytes on top of the
 * topic, each later use saves topic - 3, so from 6 bytes the first reuse pays it back.
 */
export const MIN_ALIASED_TOPIC_BYTES = 6;
/** At most this many per connection, whatever the client allows: each one keeps a topic in memory. */
export const MAX_ALIASES = 64;

/** How the next PUBLISH of a topic is sent. */
export interface AliasPlan {
  readonly alias: number;
  /** true: the client knows the alias, the topic goes empty. false: topic and alias go together, binding it. */
  readonly known: boolean;
  /** The topic whose alias is rebound (least recently used), when all are taken. */
  readonly evicts?: string | undefined;
}

export class OutboundTopicAliases {
  /** Topic -> alias, least recently used first (Map order). */
  private readonly byTopic = new Map<string, number>();
  readonly max: number;

  constructor(clientMaximum: number) {
    this.max = Math.min(clientMaximum, MAX_ALIASES);
  }

  /** undefined: the topic goes without an alias. Nothing changes until `commit`. */
  plan(topic: string, topicBytes: number): AliasPlan | undefined {
    if (this.max <= 0 || topicBytes < MIN_ALIASED_TOPIC_BYTES) return undefined;
    const alias = this.byTopic.get(topic);
    if (alias !== undefined) return { alias, known: true };
    if (this.byTopic.size < this.max) return { alias: this.byTopic.size + 1, known: false };
    const [evicts, reused] = this.byTopic.entries().next().value!;
    return { alias: reused, known: false, evicts };
  }

  /** The PUBLISH went out as planned: the client now maps the alias to the topic. */
  commit(topic: string, plan: AliasPlan): void {
    if (plan.evicts !== undefined) this.byTopic.delete(plan.evicts);
    // Delete first so the topic moves to the most recently used end.
    this.byTopic.delete(topic);
    this.byTopic.set(topic, plan.alias);
  }

  size(): number {
    return this.byTopic.size;
  }
}
