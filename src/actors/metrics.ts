import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { ActorRegistry } from "./registry.js";

export type Protocol = "mqtt" | "amqp";

/** The gateway's Prometheus metrics. Counters are incremented with plain calls on the hot path. */
export class Metrics {
  readonly registry = new Registry();
  private readonly connections = new Gauge({
    name: "mqgw_connections",
    help: "Connected clients by protocol and account",
    labelNames: ["protocol", "account"] as const,
    registers: [this.registry],
  });
  /**
   * Message counts are tallied in plain numbers and handed to prom-client when it is read
   * (a scrape): its labelled `inc` hashes the labels on every call, about 0.45 µs, which
   * was 6–9 % of the gateway's CPU per QoS 0 message (docs/performance.md).
   */
  private readonly tallyIn = new Tally();
  private readonly tallyOut = new Tally();
  // biome-ignore lint/correctness/noUnusedPrivateClassMembers: made to register with the registry; a scrape reads it there
  private readonly messagesIn = tallied(this.tallyIn, {
    name: "mqgw_messages_in_total",
    help: "Messages received from clients, by protocol and outcome",
    registers: [this.registry],
  });
  // biome-ignore lint/correctness/noUnusedPrivateClassMembers: made to register with the registry; a scrape reads it there
  private readonly messagesOut = tallied(this.tallyOut, {
    name: "mqgw_messages_out_total",
    help: "Messages sent to clients, by protocol and outcome",
    registers: [this.registry],
  });
  private readonly refusedTotal = new Counter({
    name: "mqgw_refused_total",
    help: "Requests refused, by protocol and reason",
    labelNames: ["protocol", "reason"] as const,
    registers: [this.registry],
  });
  private readonly droppedTotal = new Counter({
    name: "mqgw_dropped_total",
    help: "Messages dropped (QoS 0 / presettled), by protocol and reason",
    labelNames: ["protocol", "reason"] as const,
    registers: [this.registry],
  });
  private readonly quotaExceededTotal = new Counter({
    name: "mqgw_quota_exceeded_total",
    help: "Publishes over a quota (limits.per_client, limits.per_account), by protocol, scope (client or account) and the client's account; each is also in mqgw_dropped_total or mqgw_refused_total with reason quota_exceeded",
    labelNames: ["protocol", "scope", "account"] as const,
    registers: [this.registry],
  });
  private readonly propertiesDropped = new Counter({
    name: "mqgw_properties_dropped_total",
    help: "Message properties left out because the receiving protocol cannot carry them (mapping-to-nats.md, What a crossing loses)",
    labelNames: ["protocol"] as const,
    registers: [this.registry],
  });
  private readonly adminRequests = new Counter({
    name: "mqgw_admin_requests_total",
    help: "Admin requests answered, by op, scope and outcome",
    labelNames: ["op", "scope", "outcome"] as const,
    registers: [this.registry],
  });
  private readonly jetstreamErrors = new Counter({
    name: "mqgw_jetstream_errors_total",
    help: "JetStream requests of the gateway that failed (publish not acknowledged, consumer or KV unavailable), by protocol and op",
    labelNames: ["protocol", "op"] as const,
    registers: [this.registry],
  });
  private readonly natsReconnects = new Counter({
    name: "mqgw_nats_reconnects_total",
    help: "Reconnects of the gateway's NATS connections (client connections and its own)",
    registers: [this.registry],
  });
  private readonly embeddedRestarts = new Counter({
    name: "mqgw_embedded_nats_restarts_total",
    help: "Restarts of the embedded nats-server after it exited",
    registers: [this.registry],
  });
  private readonly orphanConsumers = new Counter({
    name: "mqgw_orphan_consumers_removed_total",
    help: 'Session consumers no session record named, removed by the session sweep (left by a crash or a lost answer mid-resume or mid-removal); the consumers sessions read are mqgw_actors{machine="storedDelivery"}',
    labelNames: ["account"] as const,
    registers: [this.registry],
  });
  readonly jsAckLatency = new Histogram({
    name: "mqgw_jetstream_ack_seconds",
    help: "Time from a stored publish to the stream's ack",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor(actors: ActorRegistry, build: BuildInfo, sources: ScrapeSources = {}) {
    // process_* and nodejs_*: CPU, memory, event loop lag, GC, handles (prom-client's standard set).
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: "mqgw_build_info",
      help: "Always 1; the labels say which gateway build runs",
      labelNames: ["version", "node", "id"] as const,
      registers: [this.registry],
    }).set({ version: build.version, node: process.version, id: build.id }, 1);
    const readAtScrape = (
      name: string,
      help: string,
      labelNames: readonly string[],
      read: (set: (labels: Record<string, string>, n: number) => void) => void,
    ) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers: [this.registry],
        collect() {
          this.reset();
          read((labels, n) => this.set(labels, n));
        },
      });
    new Counter({
      name: "mqgw_state_entries_total",
      help: "Times an actor entered a state (parents included), by machine and state: rate() gives rates per state",
      labelNames: ["machine", "state"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [machine, states] of Object.entries(actors.entered()))
          for (const [state, n] of Object.entries(states)) this.inc({ machine, state }, n);
      },
    });
    readAtScrape(
      "mqgw_sessions",
      "Client sessions held by this gateway's connections (MQTT sessions, AMQP sessions)",
      ["protocol"],
      (set) => {
        set({ protocol: "mqtt" }, actors.size("mqttSession"));
        set({ protocol: "amqp" }, actors.size("amqpSession"));
      },
    );
    readAtScrape(
      "mqgw_amqp_links",
      "Attached AMQP links, by role (sender: the client sends, receiver: the client receives)",
      ["role"],
      (set) => {
        set({ role: "sender" }, actors.size("amqpSenderLink"));
        set({ role: "receiver" }, actors.size("amqpReceiverLink"));
      },
    );
    if (sources.subscriptions)
      readAtScrape(
        "mqgw_subscriptions",
        "MQTT subscriptions (filters) and AMQP receiving links",
        ["protocol"],
        (set) => {
          for (const [protocol, n] of Object.entries(sources.subscriptions!())) set({ protocol }, n);
        },
      );
    if (sources.storedWaiting)
      readAtScrape(
        "mqgw_stored_waiting",
        "MQTT subscriptions whose stored delivery waits for its stream to answer (JetStream timeout, leader election, node lost); they retry with backoff",
        ["protocol"],
        (set) => set({ protocol: "mqtt" }, sources.storedWaiting!()),
      );
    if (sources.jetStreamApiWaiting)
      readAtScrape(
        "mqgw_jetstream_api_waiting",
        "The gateway's JetStream API and KV requests waiting for a turn (at most 256 in flight per account); a storm of resumes queues here, not in nats-server",
        [],
        (set) => set({}, sources.jetStreamApiWaiting!()),
      );
    if (sources.bytes) {
      // Node counts every socket's bytes itself; read at scrape, nothing is added per message.
      const bytes = sources.bytes;
      new Counter({
        name: "mqgw_bytes_received_total",
        help: "Bytes read from client sockets (TLS and WebSocket framing included), by protocol",
        labelNames: ["protocol"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [protocol, b] of Object.entries(bytes())) this.inc({ protocol }, b.read);
        },
      });
      new Counter({
        name: "mqgw_bytes_sent_total",
        help: "Bytes written to client sockets (TLS and WebSocket framing included), by protocol",
        labelNames: ["protocol"] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const [protocol, b] of Object.entries(bytes())) this.inc({ protocol }, b.written);
        },
      });
    }
    const gauge = new Gauge({
      name: "mqgw_actors",
      help: "Live actors by machine and state",
      labelNames: ["machine", "state"] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [machine, states] of Object.entries(actors.counts())) {
          for (const [state, n] of Object.entries(states)) this.set({ machine, state }, n);
        }
      },
    });
    void gauge;
    this.exportZeros();
  }

  /**
   * The series of the counters a dashboard shows from the start (issue 25): each at 0 for
   * the labels known before the first event, so a panel reads 0 rather than "No data". A
   * reason only a refusal names (an AMQP rejection's condition, say) appears at its first drop.
   */
  private exportZeros(): void {
    for (const [protocol, reasons] of Object.entries(DROP_REASONS))
      for (const reason of reasons) this.droppedTotal.inc({ protocol, reason }, 0);
    for (const [protocol, ops] of Object.entries(JETSTREAM_OPS))
      for (const op of ops) this.jetstreamErrors.inc({ protocol, op }, 0);
  }
  /** Admin requests at 0 for each op on each scope that serves it (the admin op table, requests.ts). */
  adminOpsKnown(opScopes: ReadonlyArray<readonly [op: string, scope: string]>): void {
    for (const [op, scope] of opScopes)
      for (const outcome of ["ok", "error"]) this.adminRequests.inc({ op, scope, outcome }, 0);
  }

  connected(protocol: Protocol, account: string, delta: number): void {
    this.connections.inc({ protocol, account }, delta);
  }
  messageIn(protocol: Protocol, outcome: string, n = 1): void {
    this.tallyIn.add(protocol, outcome, n);
  }
  messageOut(protocol: Protocol, outcome: string, n = 1): void {
    this.tallyOut.add(protocol, outcome, n);
  }
  refused(protocol: Protocol, reason: string): void {
    this.refusedTotal.inc({ protocol, reason });
  }
  dropped(protocol: Protocol, reason: string): void {
    this.droppedTotal.inc({ protocol, reason });
  }
  quotaExceeded(protocol: Protocol, scope: string, account: string): void {
    this.quotaExceededTotal.inc({ protocol, scope, account });
  }
  /** Properties (header values) a delivery left out: too long, not UTF-8, U+0000. */
  propertiesLost(protocol: Protocol, n: number): void {
    this.propertiesDropped.inc({ protocol }, n);
  }
  adminRequest(op: string, scope: string, outcome: string): void {
    this.adminRequests.inc({ op, scope, outcome });
  }
  jetstreamError(protocol: Protocol, op: "publish" | "consumer" | "kv"): void {
    this.jetstreamErrors.inc({ protocol, op });
  }
  natsReconnected(): void {
    this.natsReconnects.inc();
  }
  embeddedRestarted(): void {
    this.embeddedRestarts.inc();
  }
  orphanConsumersRemoved(account: string, n: number): void {
    this.orphanConsumers.inc({ account }, n);
  }
}

/** Why the gateway itself drops a QoS 0 / presettled message, per protocol (the callers of dropped()). */
const DROP_REASONS: Record<Protocol, readonly string[]> = {
  mqtt: [
    "refused_qos0",
    "nats_unavailable",
    "slow_consumer",
    "backlog_full",
    "expired",
    "too_large_for_client",
    "unencodable",
    "quota_exceeded",
  ],
  amqp: ["not_authorized", "slow_consumer", "too_large_for_client", "quota_exceeded"],
};

/** The JetStream work of each protocol that jetstreamError() counts. */
const JETSTREAM_OPS: Record<Protocol, readonly ("publish" | "consumer" | "kv")[]> = {
  mqtt: ["publish", "consumer", "kv"],
  amqp: ["publish"],
};

export interface BuildInfo {
  readonly version: string;
  readonly id: string;
}

/** What the gauges and byte counters read at each scrape, from where the gateway keeps it. */
export interface ScrapeSources {
  readonly subscriptions?: () => Record<string, number>;
  readonly storedWaiting?: () => number;
  readonly jetStreamApiWaiting?: () => number;
  readonly bytes?: () => Record<string, { read: number; written: number }>;
}

/** Counts by protocol and outcome not yet handed to prom-client. */
class Tally {
  private readonly byProtocol = new Map<string, Map<string, number>>();

  add(protocol: string, outcome: string, n: number): void {
    let m = this.byProtocol.get(protocol);
    if (!m) {
      m = new Map();
      this.byProtocol.set(protocol, m);
    }
    m.set(outcome, (m.get(outcome) ?? 0) + n);
  }

  /** Hands every non-zero count to `inc` and starts again from zero (the outcome names stay). */
  drain(inc: (protocol: string, outcome: string, n: number) => void): void {
    for (const [protocol, m] of this.byProtocol) {
      for (const [outcome, n] of m) {
        if (n === 0) continue;
        m.set(outcome, 0);
        inc(protocol, outcome, n);
      }
    }
  }
}

function tallied(
  tally: Tally,
  config: { name: string; help: string; registers: Registry[] },
): Counter<"protocol" | "outcome"> {
  return new Counter({
    ...config,
    labelNames: ["protocol", "outcome"] as const,
    collect() {
      tally.drain((protocol, outcome, n) => this.inc({ protocol, outcome }, n));
    },
  });
}
