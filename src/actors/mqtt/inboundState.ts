/**
 * What an MQTT session remembers of the client's own QoS 1/2 publishes, so that a resend
 * is known as one after a reconnect, here or on another gateway (it gets the Nats-Msg-Id
 * it had, and the stream keeps one copy), and a QoS 2 publish is passed on once
 * [MQTT-4.3.3-9]. A publish's identity is the publish, never its content: a new message
 * gets a new id whatever its packet id and payload (docs/decisions/publish-identity.md).
 *
 * The session owns the persistence: `persist` writes the session record now (the sessions
 * bucket for a session that outlives its connection; nothing for one that does not).
 */
export class InboundState {
  // Made on first use: most connections never publish at QoS 1/2, and two Maps per idle
  // connection were about 0.5 KiB of its heap (docs/performance.md, idle memory).
  private unackedIds: Map<number, string> | undefined;
  private qos2Ids: Map<number, string> | undefined;
  private storingDigests: Map<number, string> | undefined;

  /** Packet id -> Nats-Msg-Id of a QoS 1/2 publish taken and not yet acknowledged to the client. */
  get unacked(): Map<number, string> {
    return (this.unackedIds ??= new Map());
  }

  /** Packet id -> Nats-Msg-Id of a QoS 2 publish stored and PUBRECed, waiting for its PUBREL. */
  get qos2(): Map<number, string> {
    return (this.qos2Ids ??= new Map());
  }

  /**
   * Packet id -> digest of topic and payload of a QoS 2 publish being stored, not yet
   * PUBRECed: a client that resends it after a crash of the gateway without DUP (Debian's
   * paho-mqtt 1.6.1 does, for some of what it had in flight) is known by it.
   */
  get storing(): Map<number, string> {
    return (this.storingDigests ??= new Map());
  }

  constructor(
    private readonly persist: () => Promise<boolean> = async () => true,
    /** The session outlives the connection: what is remembered is saved (else nothing needs a digest). */
    readonly kept = false,
  ) {}

  /**
   * Writes the session record now; resolves true once it is stored (at once for a session
   * kept in memory only), false when it could not be (the store failed, or the session
   * moved to another connection).
   */
  save(): Promise<boolean> {
    return this.persist();
  }

  /** The session record's form: pairs, since JSON has no Map. */
  toRecord(): InboundRecord | undefined {
    if (!this.unackedIds?.size && !this.qos2Ids?.size) return undefined;
    return {
      unacked: [...(this.unackedIds ?? [])],
      qos2: [...(this.qos2Ids ?? [])],
      ...(this.storingDigests?.size ? { storing: [...this.storingDigests] } : {}),
    };
  }

  /** Takes what a saved session remembered (a resume, on this gateway or another). */
  restore(record: InboundRecord | undefined): void {
    for (const [id, msgId] of record?.unacked ?? []) this.unacked.set(id, msgId);
    for (const [id, msgId] of record?.qos2 ?? []) this.qos2.set(id, msgId);
    for (const [id, digest] of record?.storing ?? []) this.storing.set(id, digest);
  }
}

/** As the sessions bucket keeps it. */
export interface InboundRecord {
  readonly unacked?: ReadonlyArray<readonly [number, string]>;
  readonly qos2?: ReadonlyArray<readonly [number, string]>;
  readonly storing?: ReadonlyArray<readonly [number, string]>;
}
