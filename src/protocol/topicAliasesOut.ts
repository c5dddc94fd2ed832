/**
 * Topic aliases the gateway assigns on one connection to an MQTT 5 client that allows
 * them (its CONNECT's Topic Alias Maximum > 0). When all are taken, the least recently
 * used alias is rebound only to a topic seen more recently than that alias was used
 * (docs/decisions/topic-aliases.md).
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

interface Bound {
  readonly alias: number;
  /** The send (see `tick`) that last used it. */
  lastUsed: number;
}

export class OutboundTopicAliases {
  /** Topic -> its alias, least recently used first (Map order). */
  private readonly byTopic = new Map<string, Bound>();
  /**
   * Topics sent without an alias while all were taken, and the send that saw them last,
   * oldest first; at most `max`. A topic not in here (or seen before the least recently
   * used alias was used) is not worth an alias yet: under a fleet that cycles through
   * more topics than the table holds, rebinding on every send would cost 3 bytes each time
   * and save nothing, so the table stays as it is.
   */
  private readonly unaliased = new Map<string, number>();
  /** Sends planned so far: the clock of `lastUsed` and `unaliased`. */
  private tick = 0;
  readonly max: number;

  constructor(clientMaximum: number) {
    this.max = Math.min(clientMaximum, MAX_ALIASES);
  }

  /** undefined: the topic goes without an alias (and is remembered as seen). Aliases change only on `commit`. */
  plan(topic: string, topicBytes: number): AliasPlan | undefined {
    if (this.max <= 0 || topicBytes < MIN_ALIASED_TOPIC_BYTES) return undefined;
    const now = ++this.tick;
    const bound = this.byTopic.get(topic);
    if (bound !== undefined) return { alias: bound.alias, known: true };
    if (this.byTopic.size < this.max) return { alias: this.byTopic.size + 1, known: false };
    const [evicts, oldest] = this.byTopic.entries().next().value!;
    const seen = this.unaliased.get(topic);
    if (seen !== undefined && seen > oldest.lastUsed) return { alias: oldest.alias, known: false, evicts };
    this.unaliased.delete(topic);
    this.unaliased.set(topic, now);
    if (this.unaliased.size > this.max) this.unaliased.delete(this.unaliased.keys().next().value!);
    return undefined;
  }

  /** The PUBLISH went out as planned: the client now maps the alias to the topic. */
  commit(topic: string, plan: AliasPlan): void {
    if (plan.evicts !== undefined) this.byTopic.delete(plan.evicts);
    this.unaliased.delete(topic);
    // Delete first so the topic moves to the most recently used end.
    this.byTopic.delete(topic);
    this.byTopic.set(topic, { alias: plan.alias, lastUsed: this.tick });
  }

  size(): number {
    return this.byTopic.size;
  }
}
