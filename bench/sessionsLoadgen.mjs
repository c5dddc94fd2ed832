// One side's devices for the sessions scenario (forked by bench/sessions.mjs): each device
// its own connection and client id, a persistent session (MQTT 3.1.1 clean session 0, or
// MQTT 5 with Session Expiry 3600), subscribed at QoS 1 to `dev/<i>/cmd` and `fleet/all/#`.
// Packets through mqtt-packet (v5 CONNACK properties and reason codes need a real parser);
// a few packets per device per phase, so the parse costs little.
//
// The parent sends commands ({ id, cmd, ... }) and gets one answer each ({ id, ... }):
//   connect    first connect + SUBSCRIBE of every device, `concurrency` in flight
//   drop       every socket destroyed (no DISCONNECT: the session stays)
//   reconnect  every device at once, clean start 0, no SUBSCRIBE; CONNACKs counted
//   await      until every device has the message `mark` (or `timeoutMs`); duplicates
//   resume     every device whose socket the server closes retries with backoff until
//              CONNACKed; answered once all are back (or `timeoutMs`) — the restart phase
//   marks      messages per mark so far (duplicates after the restart)
//   arrivals   when each of `ids` first got `mark`
import net from "node:net";
import mqtt from "mqtt-packet";

const spec = JSON.parse(process.argv[2]);
const { port, prefix, indices } = spec;
const EXPIRY = 3600;
const now = () => Date.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let addressRound = 0;
/** A fresh loopback source address per connect round: the last round's ports may be in TIME_WAIT. */
const nextAddress = () => `127.${spec.addressBlock}.${spec.addressSub}.${1 + (addressRound++ % 250)}`;

const devices = indices.map((i, k) => ({
  i,
  id: `${prefix}-${i}`,
  v5: spec.mix === "5" ? true : spec.mix === "311" ? false : k % 2 === 1,
  sock: null,
  marks: new Map(), // mark -> times received
  firstAt: new Map(), // mark -> when it first came (ms)
}));
const bump = (o, k) => {
  o[k] = (o[k] ?? 0) + 1;
};

/**
 * One connection attempt: resolves { ok, present, code } at CONNACK (and SUBACK when
 * `subscribe`), or { ok: false, error } when the socket fails or closes first.
 */
function open(d, { subscribe, localAddress, timeoutMs }) {
  return new Promise((resolve) => {
    const version = d.v5 ? 5 : 4;
    const parser = mqtt.parser({ protocolVersion: version });
    const s = net.connect({ host: "127.0.0.1", port, localAddress });
    d.sock = s;
    let settled = false;
    let accepted = false;
    const timer = setTimeout(() => done({ ok: false, error: "no CONNACK in time" }), timeoutMs);
    const done = (r) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      accepted = r.ok;
      if (!r.ok) s.destroy();
      resolve(r);
    };
    let connack;
    s.setNoDelay(true);
    s.on("error", (e) => done({ ok: false, error: e.code ?? e.message }));
    s.on("close", () => {
      if (d.sock === s) d.sock = null;
      // Only a session's live connection going away starts a retry, not a failed attempt.
      if (accepted) d.onClose?.(d);
      done({ ok: false, error: connack ? "closed before SUBACK" : "closed before CONNACK" });
    });
    s.on("data", (c) => parser.parse(c));
    parser.on("error", (e) => done({ ok: false, error: `parse: ${e.message}` }));
    parser.on("packet", (p) => {
      if (p.cmd === "connack") {
        const code = d.v5 ? p.reasonCode : p.returnCode;
        connack = { present: p.sessionPresent ? 1 : 0, code };
        if (code !== 0) return done({ ok: false, refused: code, error: `CONNACK ${code}` });
        if (!subscribe) done({ ok: true, ...connack });
      } else if (p.cmd === "suback") {
        const bad = p.granted.filter((g) => g >= 0x80);
        d.fleetGranted = p.granted[1] < 0x80;
        done({ ok: true, ...connack, subackRefused: bad.length ? bad : undefined });
      } else if (p.cmd === "publish") {
        const mark = p.payload.toString();
        if (!d.marks.has(mark)) d.firstAt.set(mark, now());
        d.marks.set(mark, (d.marks.get(mark) ?? 0) + 1);
        if (p.qos > 0) s.write(mqtt.generate({ cmd: "puback", messageId: p.messageId }, { protocolVersion: version }));
      }
    });
    s.on("connect", () => {
      s.write(
        mqtt.generate(
          {
            cmd: "connect",
            protocolId: "MQTT",
            protocolVersion: version,
            clean: false,
            clientId: d.id,
            keepalive: 60,
            ...(d.v5 ? { properties: { sessionExpiryInterval: EXPIRY } } : {}),
          },
          { protocolVersion: version },
        ),
      );
      if (subscribe)
        s.write(
          mqtt.generate(
            {
              cmd: "subscribe",
              messageId: 1,
              subscriptions: [
                { topic: `dev/${d.i}/cmd`, qos: 1 },
                { topic: "fleet/all/#", qos: 1 },
              ],
            },
            { protocolVersion: version },
          ),
        );
    });
  });
}

/** Tallies of one round of attempts. */
function tally() {
  return { ok: 0, present0: 0, present1: 0, refused: {}, subackRefused: {}, errors: {} };
}
function count(t, r) {
  if (r.ok) {
    t.ok++;
    t[r.present ? "present1" : "present0"]++;
    for (const g of r.subackRefused ?? []) bump(t.subackRefused, g);
  } else if (r.refused !== undefined) bump(t.refused, r.refused);
  else bump(t.errors, r.error);
}

async function connectRound({ subscribe, concurrency, timeoutMs }) {
  const t = tally();
  const localAddress = nextAddress();
  const start = now();
  const cpu0 = process.cpuUsage();
  let next = 0;
  let last = start;
  let first;
  const worker = async () => {
    while (next < devices.length) {
      const d = devices[next++];
      const r = await open(d, { subscribe, localAddress, timeoutMs });
      count(t, r);
      if (r.ok) last = now();
      if (r.ok && first === undefined) first = last;
    }
  };
  const workers = Array.from({ length: Math.min(concurrency, devices.length) }, worker);
  // Every worker's first socket is opened in this turn: how long that took is the load generator's, not the server's.
  const opened = now();
  await Promise.all(workers);
  // Who holds `fleet/all/#` (granted in its SUBACK): the most an offline message can reach.
  const fleetGranted = devices.filter((d) => d.fleetGranted).length;
  const cpu = process.cpuUsage(cpu0);
  return {
    ...t,
    fleetGranted,
    start,
    opened,
    firstOk: first,
    lastOk: last,
    end: now(),
    cpuUser: cpu.user / 1e6,
    cpuSystem: cpu.system / 1e6,
  };
}

function drop() {
  let n = 0;
  for (const d of devices) {
    d.onClose = undefined;
    if (d.sock) {
      d.sock.destroy();
      d.sock = null;
      n++;
    }
  }
  return { dropped: n };
}

async function awaitMark({ mark, timeoutMs }) {
  const until = now() + timeoutMs;
  const have = () => devices.filter((d) => d.marks.has(mark)).length;
  while (have() < devices.length && now() < until) await sleep(100);
  return marks(mark);
}

/** `missing`: the first few client ids still without it; `lastAt`: when the last that has it got it. */
function marks(mark) {
  let got = 0;
  let duplicates = 0;
  let lastAt = 0;
  const missing = [];
  for (const d of devices) {
    const n = d.marks.get(mark) ?? 0;
    if (n) {
      got++;
      lastAt = Math.max(lastAt, d.firstAt.get(mark));
    } else if (missing.length < 20) missing.push(d.id);
    if (n > 1) duplicates += n - 1;
  }
  return { got, duplicates, at: now(), lastAt, missing };
}

/**
 * The restart: each device whose socket closes (or is closed now) connects again with
 * backoff (250 ms doubling to 5 s, jittered down by up to half) until a CONNACK accepts it.
 */
function resume({ timeoutMs }) {
  const t = tally();
  let attempts = 0;
  let back = 0;
  let last = now();
  const start = now();
  let wake;
  const finished = new Promise((r) => {
    wake = r;
  });
  const retry = async (d) => {
    let delay = 250;
    while (now() - start < timeoutMs) {
      attempts++;
      const r = await open(d, { subscribe: false, localAddress: nextAddress(), timeoutMs: 30_000 });
      if (r.ok) {
        t.ok++;
        t[r.present ? "present1" : "present0"]++;
        back++;
        last = now();
        d.onClose = undefined;
        if (back === devices.length) wake();
        return;
      }
      if (r.refused !== undefined) bump(t.refused, r.refused);
      else bump(t.errors, r.error);
      await sleep(delay * (0.5 + Math.random() / 2));
      delay = Math.min(5000, delay * 2);
    }
  };
  for (const d of devices) {
    d.onClose = (x) => {
      x.onClose = undefined;
      retry(x);
    };
    if (!d.sock) d.onClose(d);
  }
  const timer = setTimeout(wake, timeoutMs);
  return finished.then(() => {
    clearTimeout(timer);
    return { ...t, back, notBack: devices.length - back, attempts, start, lastOk: last, end: now() };
  });
}

// Keepalive 60: every connected device pings now and then, so long phases do not time it out.
setInterval(() => {
  const ping = Buffer.from([0xc0, 0x00]);
  for (const d of devices) if (d.sock && !d.sock.connecting) d.sock.write(ping);
}, 20_000).unref();

const commands = {
  connect: (m) => connectRound({ subscribe: true, concurrency: m.concurrency, timeoutMs: m.timeoutMs }),
  reconnect: (m) => connectRound({ subscribe: false, concurrency: devices.length, timeoutMs: m.timeoutMs }),
  drop,
  await: awaitMark,
  resume,
  marks: (m) => marks(m.mark),
  arrivals: (m) => ({
    arrivals: devices.filter((d) => m.ids.includes(d.id)).map((d) => [d.id, d.firstAt.get(m.mark) ?? null]),
  }),
  connected: () => ({ connected: devices.filter((d) => d.sock && !d.sock.connecting).length }),
};
process.on("message", async (m) => {
  try {
    process.send({ id: m.id, ...(await commands[m.cmd](m)) });
  } catch (e) {
    process.send({ id: m.id, error: e.stack ?? String(e) });
  }
});
process.send({ ready: true, devices: devices.length, v5: devices.filter((d) => d.v5).length });
