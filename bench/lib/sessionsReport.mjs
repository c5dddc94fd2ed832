// The sessions scenario's table (bench/sessions.mjs) for results/<out>.md: one table per N,
// then what failed per phase (client-side counts and the servers' warnings, grouped).

const num = (x, d = 0) =>
  x === null || x === undefined || !Number.isFinite(x)
    ? "-"
    : x.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d });
const codes = (o) =>
  Object.entries(o ?? {})
    .map(([k, v]) => `${num(v)}× ${k}`)
    .join(", ");
const median = (xs) => {
  const v = (xs ?? []).filter((x) => typeof x === "number").sort((a, b) => a - b);
  return v.length ? v[(v.length - 1) >> 1] : undefined;
};
const sum = (xs, k) => xs.reduce((a, x) => a + (x[k] ?? 0), 0);
/** How many storms phase 2 ran in a row (runs before that field: one). */
const STORMS_OF = (r) => r.gateway?.phases?.storm?.repeats?.length ?? r.reference?.phases?.storm?.repeats?.length ?? 1;
const PHASES = ["connect", "storm", "offline", "storm2", "blip", "restart"];
const PHASE_TITLE = {
  connect: "connect + subscribe",
  storm: "reconnect storm",
  offline: "offline message",
  storm2: "storm after a delivery",
  blip: "blip (drop and reconnect at once)",
  restart: "restart",
};

export function sessionsSection(s) {
  if (!s) return "";
  if (!s.measured) return `\n## Persistent sessions (\`--only sessions\`)\n\nnot measured: ${s.reason}\n`;
  const parts = [
    `
## Persistent sessions (\`--only sessions\`, bench/sessions.mjs)

Each device a persistent session subscribed at QoS 1 to \`dev/<i>/cmd\` and \`fleet/all/#\`. The gateway: its embedded
default (its own nats-server on nats-server's default limits), devices ${s.mix === "half" ? "half MQTT 3.1.1 clean session 0, half MQTT 5 Session Expiry 3600" : s.mix === "5" ? "MQTT 5 Session Expiry 3600" : "MQTT 3.1.1 clean session 0"}.
The reference: nats-server's own MQTT, devices MQTT 3.1.1 clean session 0 (it speaks no MQTT 5), **its streams' consumer limit
raised** (\`jetstream { limits { default_max_consumers: ${num(s.referenceMaxConsumers)} } }\`; nats-server's default of 1,000 per stream
stops its MQTT at about 333 such sessions). Consumers: those of the stream each side keeps sessions on (the gateway's
\`MQGW_MSGS\`, 2 per session by its design; nats-server's \`$MQTT_msgs\`, 3 per session in its layout), counted at once after
the phase and again each second until it matches (settled: the last count, 10 s at most), orphans = settled - expected.
Restart: from SIGTERM of the server (the gateway stops its nats-server with it) until the last device is back, every device
retrying with backoff (250 ms doubling to 5 s); then one live QoS 1 message to \`fleet/all/x\`.
`,
  ];
  for (const n of s.ns) {
    const r = s.byN[n];
    if (!r) continue;
    if (r.measured === false) {
      parts.push(`\n### N = ${num(n)}\n\nnot measured: ${r.reason}\n`);
      continue;
    }
    const rows = [];
    const ph = (side, p) => r[side]?.phases?.[p];
    const row = (what, f, { ratio = false, d = 0 } = {}) => {
      const a = f(ph("reference", what[0]), "reference");
      const b = f(ph("gateway", what[0]), "gateway");
      const q = ratio && typeof a === "number" && typeof b === "number" && a > 0 ? `${(b / a).toFixed(2)}x` : "";
      const show = (x) => (typeof x === "number" ? num(x, d) : (x ?? "-"));
      rows.push(`| ${PHASE_TITLE[what[0]]} | ${what[1]} | ${show(a)} | ${show(b)} | ${q} |`);
    };
    const failed = (x) => (x ? n - (x.ok ?? 0) : undefined);
    row(["connect", "seconds (200 in flight)"], (x) => x?.seconds, { ratio: true, d: 1 });
    row(["connect", "not connected and subscribed"], failed);
    row(["connect", "sessions holding fleet/all/# (granted)"], (x) => x?.fleetGranted);
    row(["connect", "SUBSCRIBE filters refused"], (x) =>
      x ? Object.values(x.subackRefused).reduce((a, b) => a + b, 0) : undefined,
    );
    row(["storm", "seconds until all CONNACKed (the first)"], (x) => x?.seconds, { ratio: true, d: 1 });
    row(["storm", `seconds, median of ${STORMS_OF(r)} in a row`], (x) => median(x?.repeats?.map((y) => y.seconds)), {
      ratio: true,
      d: 1,
    });
    row(["storm", "each storm's seconds"], (x) => x?.repeats?.map((y) => num(y.seconds, 1)).join(" / "));
    row(["storm", "session present 1 / 0 (every storm)"], (x) =>
      x ? `${num(sum(x.repeats ?? [x], "present1"))} / ${num(sum(x.repeats ?? [x], "present0"))}` : undefined,
    );
    row(["storm", "not back (refused or no CONNACK, every storm)"], (x) =>
      x ? (x.repeats ?? [x]).reduce((a, y) => a + (n - (y.ok ?? 0)), 0) : undefined,
    );
    row(["offline", "sessions that got it within 30 s"], (x) => x?.got);
    row(["offline", "... within 120 s (late, not lost)"], (x) => x?.gotLate);
    row(["offline", "seconds until the last got it"], (x) => x?.lastSeconds, { d: 1 });
    row(["offline", "duplicates"], (x) => x?.duplicates);
    row(["offline", "reconnect: session present 0 / not back"], (x) =>
      x ? `${num(x.present0)} / ${num(failed(x))}` : undefined,
    );
    row(["storm2", "seconds until all CONNACKed"], (x) => x?.seconds, { ratio: true, d: 1 });
    row(["storm2", "not back (refused or no CONNACK)"], failed);
    row(["blip", "seconds until all CONNACKed"], (x) => x?.seconds, { ratio: true, d: 1 });
    row(["blip", "session present 1 / 0 / not back"], (x) =>
      x ? `${num(x.present1)} / ${num(x.present0)} / ${num(failed(x))}` : undefined,
    );
    row(["restart", "seconds from SIGTERM until all back"], (x) => x?.seconds, { ratio: true, d: 1 });
    row(["restart", "of which the server's stop / start"], (x) =>
      x
        ? `${num(x.stopSeconds, 1)}${x.killed ? " (SIGKILL after 120 s)" : ""} / ${num(x.startSeconds, 1)}${x.startError ? ` (failed: ${x.startError.split("\n")[0]})` : ""}`
        : undefined,
    );
    row(["restart", "back with session present 1 / 0 / never"], (x) =>
      x ? `${num(x.present1)} / ${num(x.present0)} / ${num(x.notBack)}` : undefined,
    );
    row(["restart", "CONNACK refusals by code"], (x) => (x ? codes(x.refused) || "none" : undefined));
    row(["restart", "live QoS 1 message after: got / duplicates"], (x) =>
      x ? `${num(x.liveGot)} / ${num((x.liveDuplicates ?? 0) + (x.offlineDuplicates ?? 0))}` : undefined,
    );
    for (const p of PHASES)
      row([p, "consumers after: at once / settled (expected; orphans, < 0 missing)"], (x) =>
        x?.consumers?.owned === undefined
          ? x?.consumers?.error
          : `${x.consumers.ownedAtOnce === undefined ? "" : `${num(x.consumers.ownedAtOnce)} / `}${num(x.consumers.owned)} (${num(x.consumers.expected)}; ${num(x.consumers.orphans)})`,
      );
    for (const p of ["offline", "restart"])
      row([p, "messages kept in the sessions' stream after"], (x) => x?.consumers?.messages?.[x.consumers.stream]);
    for (const p of PHASES) row([p, "RSS MiB after"], (x) => x?.rssMiB, { ratio: true });
    for (const p of ["connect", "storm", "offline", "storm2", "blip"])
      row([p, "server CPU s"], (x) => x?.serverCpuSeconds, { ratio: true, d: 1 });
    row(["storm", "server CPU s, median storm"], (x) => median(x?.repeats?.map((y) => y.serverCpuSeconds)), {
      ratio: true,
      d: 1,
    });
    // The load generator's own share: a round's seconds are the server's only after its first CONNACK.
    for (const p of ["storm", "storm2", "blip"])
      row([p, "load generator: first CONNACK at s / its CPU s (user + system)"], (x) =>
        x?.firstOkSeconds === undefined
          ? undefined
          : `${num(x.firstOkSeconds, 1)} / ${num(x.loadgenCpu.user + x.loadgenCpu.system, 1)} (${num(x.loadgenCpu.user, 1)} + ${num(x.loadgenCpu.system, 1)})`,
      );
    parts.push(`
### N = ${num(n)}

| phase | figure | nats-server MQTT | mq-gateway + its nats-server | gateway / reference |
| --- | --- | ---: | ---: | ---: |
${rows.join("\n")}
`);
    const fails = [];
    for (const side of ["reference", "gateway"])
      for (const p of PHASES) {
        const x = ph(side, p);
        if (!x) continue;
        const client = codes({
          ...prefixed("CONNACK ", x.refused),
          ...prefixed("SUBACK ", x.subackRefused),
          ...x.errors,
        });
        const server = Object.entries(x.serverLog ?? {})
          .sort((a, b) => b[1] - a[1])
          .slice(0, 6)
          .map(([k, v]) => `${num(v)}× \`${k.replaceAll("`", "'").replaceAll("|", "/")}\``)
          .join("; ");
        if (client || server) fails.push(`| ${side} | ${PHASE_TITLE[p]} | ${client || "-"} | ${server || "-"} |`);
      }
    if (fails.length)
      parts.push(`
Failures at N = ${num(n)} (client side: CONNACK/SUBACK codes and socket outcomes, ECONNREFUSED while a server restarts;
server side: its warnings and errors, numbers as N):

| side | phase | clients saw | server logged |
| --- | --- | --- | --- |
${fails.join("\n")}
`);
  }
  return parts.join("");
}
const prefixed = (p, o) => Object.fromEntries(Object.entries(o ?? {}).map(([k, v]) => [`${p}${k}`, v]));
