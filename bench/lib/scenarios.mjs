// The scenarios of the throughput and latency runs (bench/loadgen.mjs).

/** What each scenario is made of. Topics are the same on both sides. */
export const SCENARIOS = {
  qos0: {
    title: "QoS 0 MQTT -> MQTT (4 pub, 4 sub)",
    pubs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", topics: [`bench/p2p/${i}`], qos: 0 })),
    subs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", filter: `bench/p2p/${i}`, qos: 0 })),
    fanout: 1,
  },
  fanout: {
    title: "QoS 0 fan-out (1 pub, 8 sub on bench/#)",
    pubs: [{ kind: "mqtt", topics: ["bench/fan/x"], qos: 0 }],
    subs: Array.from({ length: 8 }, () => ({ kind: "mqtt", filter: "bench/#", qos: 0 })),
    fanout: 8,
  },
  m2n: {
    title: "QoS 0 MQTT -> NATS (4 MQTT pub, 1 NATS sub)",
    pubs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", topics: [`bench/m2n/${i}`], qos: 0 })),
    subs: [{ kind: "nats", filter: "bench.m2n.>" }],
    fanout: 1,
  },
  n2m: {
    title: "NATS -> MQTT QoS 0 (1 NATS pub, 4 MQTT sub)",
    pubs: [{ kind: "nats", topics: [0, 1, 2, 3].map((i) => `bench.n2m.${i}`) }],
    subs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", filter: `bench/n2m/${i}`, qos: 0 })),
    fanout: 1,
  },
  qos1: {
    title: "QoS 1 MQTT -> MQTT, stored subject (4 pub, 4 sub)",
    pubs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", topics: [`stored/q1/${i}`], qos: 1 })),
    subs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", filter: `stored/q1/${i}`, qos: 1 })),
    fanout: 1,
  },
  qos1m: {
    title: "QoS 1 MQTT -> MQTT, no binding: the MQTT store (4 pub, 4 persistent sub)",
    pubs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", topics: [`msgs/q1/${i}`], qos: 1 })),
    subs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", filter: `msgs/q1/${i}`, qos: 1, persistent: true })),
    fanout: 1,
  },
  qos1n: {
    title: "QoS 1 MQTT -> NATS, no binding, no persistent session (4 pub, 1 NATS sub)",
    pubs: [0, 1, 2, 3].map((i) => ({ kind: "mqtt", topics: [`nostore/q1/${i}`], qos: 1 })),
    subs: [{ kind: "nats", filter: "nostore.q1.>" }],
    fanout: 1,
  },
  lat0: {
    title: "latency QoS 0 at 2,000 msgs/s",
    pubs: [{ kind: "mqtt", topics: ["bench/lat/0"], qos: 0 }],
    subs: [{ kind: "mqtt", filter: "bench/lat/0", qos: 0 }],
    fanout: 1,
    rate: 2000,
  },
  lat1: {
    title: "latency QoS 1 (stored) at 2,000 msgs/s",
    pubs: [{ kind: "mqtt", topics: ["stored/lat/0"], qos: 1 }],
    subs: [{ kind: "mqtt", filter: "stored/lat/0", qos: 1 }],
    fanout: 1,
    rate: 2000,
  },
};

/**
 * The saturating twins of the three QoS 0 throughput figures (bench/saturate.mjs): the same
 * clients and topics, the publishers open-loop (no window). `base` names the windowed row
 * each one stands beside.
 */
export const SATURATING = ["qos0sat", "m2nsat", "n2msat"];
for (const name of SATURATING) {
  const base = name.slice(0, -3);
  SCENARIOS[name] = { ...SCENARIOS[base], title: `${SCENARIOS[base].title}, saturating`, base, saturating: true };
}
