import { Counter, Gauge, Histogram, Registry } from "prom-client";
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
  private readonly messagesIn = tallied(this.tallyIn, {
    name: "mqgw_messages_in_total",
    help: "Messages received from clients, by protocol and outcome",
    registers: [this.registry],
  });
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
  readonly jsAckLatency = new Histogram({
    name: "mqgw_jetstream_ack_seconds",
    help: "Time from a stored publish to the stream's ack",
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  constructor(actors: ActorRegistry) {
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
  /** Properties (header values) a delivery left out: too long, not UTF-8, U+0000. */
  propertiesLost(protocol: Protocol, n: number): void {
    this.propertiesDropped.inc({ protocol }, n);
  }
  adminRequest(op: string, scope: string, outcome: string): void {
    this.adminRequests.inc({ op, scope, outcome });
  }
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

function tallied(tally: Tally, config: { name: string; help: string; registers: Registry[] }): Counter<"protocol" | "outcome"> {
  return new Counter({
    ...config,
    labelNames: ["protocol", "outcome"] as const,
    collect() {
      tally.drain((protocol, outcome, n) => this.inc({ protocol, outcome }, n));
    },
  });
}
