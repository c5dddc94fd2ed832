import { describe, expect, it, vi } from "vitest";
import {
  type ConnectRequest,
  effectiveKeepalive,
  mqttConnectionMachine,
  termsOf,
} from "../../src/machines/mqttConnection.js";
import { drive } from "./emitted.js";

const input = { connectTimeoutMs: 1_000, maxKeepaliveSec: 120 };
const request = (extra: Partial<ConnectRequest> = {}): ConnectRequest => ({
  protocolVersion: 5,
  clientId: "c",
  keepaliveSec: 10,
  cleanStart: true,
  sessionExpirySec: 0,
  ...extra,
});
/** What the machine is told of a CONNECT: its terms (the edge keeps the rest). */
const terms = (extra: Partial<ConnectRequest> = {}) => termsOf(request(extra));
const will = { topic: "w", payload: new Uint8Array(), qos: 0 as const, retain: false, delayMs: 0 };

function serving(extra: Partial<ConnectRequest> = {}) {
  const d = drive(mqttConnectionMachine, input);
  d.actor.send({ type: "CONNECT", terms: terms(extra) });
  d.actor.send({ type: "NATS_ACQUIRED", account: "", natsUp: true });
  d.actor.send({ type: "SESSION_READY", sessionPresent: false });
  return d;
}

describe("mqttConnection machine", () => {
  it("is told a CONNECT's terms only: clients alike but for their id, credentials and will's message are one event", () => {
    const a = terms({ clientId: "a", username: "u1", password: "p1", will: { ...will, payload: Buffer.from("x") } });
    const b = terms({ clientId: "b", username: "u2", password: "p2", will: { ...will, topic: "other" } });
    expect(a).toEqual(b);
    expect(JSON.stringify(a)).not.toMatch(/"a"|u1|p1/);
  });

  it("CONNECT -> authenticating -> CONNACK 0 -> serving", () => {
    const d = serving();
    expect(d.actor.getSnapshot().hasTag("serving")).toBe(true);
    expect(d.types()).toEqual(["acquire_nats", "open_session", "connack", "serve"]);
  });

  it("a NATS auth refusal answers CONNACK 0x86 (v5) / 4 (3.1.1) and closes", () => {
    for (const [version, code] of [
      [5, 0x86],
      [4, 4],
    ] as const) {
      const d = drive(mqttConnectionMachine, input);
      d.actor.send({ type: "CONNECT", terms: terms({ protocolVersion: version }) });
      d.actor.send({ type: "NATS_REFUSED", auth: true, reason: "bad" });
      expect(d.emitted.find((e) => e.type === "connack")?.returnCode).toBe(code);
      expect(d.actor.getSnapshot().status).toBe("done");
    }
  });

  it("a normal DISCONNECT closes without the will; 0x04 publishes it", () => {
    vi.useFakeTimers();
    try {
      const a = serving({ will });
      a.actor.send({ type: "DISCONNECT", reasonCode: 0 });
      vi.advanceTimersByTime(1);
      expect(a.types()).not.toContain("publish_will");
      const b = serving({ will });
      b.actor.send({ type: "DISCONNECT", reasonCode: 0x04 });
      vi.advanceTimersByTime(1);
      expect(b.types()).toContain("publish_will");
    } finally {
      vi.useRealTimers();
    }
  });

  it("kick sends DISCONNECT 0x98 and publishes the will once", () => {
    vi.useFakeTimers();
    try {
      const d = serving({ will });
      d.actor.send({ type: "KICK" });
      d.actor.send({ type: "SOCKET_CLOSED" });
      vi.advanceTimersByTime(1);
      d.actor.send({ type: "SOCKET_CLOSED" });
      expect(d.emitted.filter((e) => e.type === "disconnect").map((e) => e.reasonCode)).toEqual([0x98]);
      expect(d.types().filter((t) => t === "publish_will")).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("lame duck sends 0x8B and publishes no will", () => {
    const d = serving({ will });
    d.actor.send({ type: "LAME_DUCK" });
    expect(d.emitted.find((e) => e.type === "disconnect")?.reasonCode).toBe(0x8b);
    expect(d.types()).not.toContain("publish_will");
    expect(d.actor.getSnapshot().status).toBe("done");
  });

  it("a delayed will is cancelled when the client id connects again in time", () => {
    vi.useFakeTimers();
    try {
      const d = serving({ will: { ...will, delayMs: 5_000 } });
      d.actor.send({ type: "SOCKET_CLOSED" });
      expect(d.actor.getSnapshot().value).toBe("willPending");
      expect(d.emitted.find((e) => e.type === "detach_session")).toEqual({ type: "detach_session", expirySec: 0 });
      d.actor.send({ type: "TAKEN_OVER" });
      vi.advanceTimersByTime(10_000);
      expect(d.types()).not.toContain("publish_will");
    } finally {
      vi.useRealTimers();
    }
  });

  it("MQTT 5 3.1.3.2.2: a takeover by a connection that resumes the session cancels a delayed will; a clean start ends the session and sends it", () => {
    vi.useFakeTimers();
    try {
      // Taken over while serving: the newer connection resumes; the will's delay had not passed.
      const resumed = serving({ sessionExpirySec: 60, cleanStart: false, will: { ...will, delayMs: 5_000 } });
      resumed.actor.send({ type: "TAKEN_OVER", resumed: true });
      vi.advanceTimersByTime(10_000);
      expect(resumed.types()).not.toContain("publish_will");
      expect(resumed.emitted.find((e) => e.type === "disconnect")).toMatchObject({ reasonCode: 0x8e });
      expect(resumed.actor.getSnapshot().status).toBe("done");
      // Without a delay the will goes at the close, whoever connects next.
      const atClose = serving({ sessionExpirySec: 60, cleanStart: false, will });
      atClose.actor.send({ type: "TAKEN_OVER", resumed: true });
      vi.advanceTimersByTime(0);
      expect(atClose.types()).toContain("publish_will");
      // A clean start ends the session: the will goes now, without waiting for its delay.
      const clean = serving({ sessionExpirySec: 60, cleanStart: false, will: { ...will, delayMs: 5_000 } });
      clean.actor.send({ type: "TAKEN_OVER", resumed: false });
      vi.advanceTimersByTime(0);
      expect(clean.types()).toContain("publish_will");
      // Already gone when the clean start came: the will goes now too.
      const gone = serving({ sessionExpirySec: 60, cleanStart: false, will: { ...will, delayMs: 5_000 } });
      gone.actor.send({ type: "SOCKET_CLOSED" });
      gone.actor.send({ type: "TAKEN_OVER", resumed: false });
      expect(gone.types()).toContain("publish_will");
    } finally {
      vi.useRealTimers();
    }
  });

  it("keep alive expiry (told by the edge's clock, keepaliveWheel.ts) disconnects with 0x8d and serves once", () => {
    const d = serving({ keepaliveSec: 10 });
    expect(d.actor.getSnapshot().matches({ session: { serving: "online" } })).toBe(true);
    d.actor.send({ type: "KEEPALIVE_EXPIRED" });
    expect(d.emitted.find((e) => e.type === "disconnect")?.reasonCode).toBe(0x8d);
    expect(d.actor.getSnapshot().context.closeReason).toBe("keep alive expired");
    expect(d.types().filter((t) => t === "serve")).toHaveLength(1);
  });

  it("the effective keep alive: 3.1.1 keeps its own; v5 gets the cap for 0 or more than it", () => {
    const ctx = (protocolVersion: 4 | 5, keepaliveSec: number) => ({
      connectTimeoutMs: 1_000,
      maxKeepaliveSec: 120,
      closeReason: "",
      sessionExpirySec: 0,
      natsUp: true,
      terms: terms({ protocolVersion, keepaliveSec }),
    });
    expect(effectiveKeepalive(ctx(4, 0))).toBe(0);
    expect(effectiveKeepalive(ctx(4, 500))).toBe(500);
    expect(effectiveKeepalive(ctx(5, 0))).toBe(120);
    expect(effectiveKeepalive(ctx(5, 500))).toBe(120);
    expect(effectiveKeepalive(ctx(5, 30))).toBe(30);
  });

  it("no CONNECT within the connect timeout (told by the edge's clock) closes the connection", () => {
    const d = drive(mqttConnectionMachine, input);
    d.actor.send({ type: "CONNECT_TIMEOUT" });
    expect(d.actor.getSnapshot().status).toBe("done");
    expect(d.actor.getSnapshot().context.closeReason).toBe("no CONNECT in time");
    // Once CONNECT came, a late timeout changes nothing.
    const s = serving();
    s.actor.send({ type: "CONNECT_TIMEOUT" });
    expect(s.actor.getSnapshot().hasTag("serving")).toBe(true);
  });

  it("NATS down when the session opens: served with reading held until NATS_UP", () => {
    const d = drive(mqttConnectionMachine, input);
    d.actor.send({ type: "CONNECT", terms: terms() });
    d.actor.send({ type: "NATS_ACQUIRED", account: "", natsUp: true });
    d.actor.send({ type: "NATS_DOWN" });
    d.actor.send({ type: "SESSION_READY", sessionPresent: false });
    expect(d.actor.getSnapshot().hasTag("natsDown")).toBe(true);
    d.actor.send({ type: "NATS_UP" });
    expect(d.actor.getSnapshot().hasTag("natsDown")).toBe(false);
  });

  it("a session the store cannot open is refused with CONNACK 0x88 (v5) / 3 (3.1.1)", () => {
    for (const [version, code] of [
      [5, 0x88],
      [4, 3],
    ] as const) {
      const d = drive(mqttConnectionMachine, input);
      d.actor.send({ type: "CONNECT", terms: terms({ protocolVersion: version }) });
      d.actor.send({ type: "NATS_ACQUIRED", account: "", natsUp: true });
      d.actor.send({ type: "SESSION_REFUSED", reason: "no JetStream" });
      expect(d.emitted.find((e) => e.type === "connack")?.returnCode).toBe(code);
      expect(d.types()).toContain("detach_session");
      expect(d.actor.getSnapshot().status).toBe("done");
    }
  });

  it("MQTT 5 3.14.2.2.2: a DISCONNECT's session expiry replaces the CONNECT's, and cannot raise it from 0", () => {
    const kept = serving({ sessionExpirySec: 1 });
    kept.actor.send({ type: "DISCONNECT", reasonCode: 0, sessionExpirySec: 5 });
    expect(kept.emitted.find((e) => e.type === "detach_session")?.expirySec).toBe(5);
    const ended = serving({ sessionExpirySec: 60 });
    ended.actor.send({ type: "DISCONNECT", reasonCode: 0, sessionExpirySec: 0 });
    expect(ended.emitted.find((e) => e.type === "detach_session")?.expirySec).toBe(0);
    // [MQTT-3.14.2-2] 0 at CONNECT: a non-zero one on DISCONNECT is a protocol error (0x82); the session still ends.
    const raised = serving({ sessionExpirySec: 0 });
    raised.actor.send({ type: "DISCONNECT", reasonCode: 0, sessionExpirySec: 30 });
    expect(raised.emitted.find((e) => e.type === "disconnect")?.reasonCode).toBe(0x82);
    expect(raised.emitted.find((e) => e.type === "detach_session")?.expirySec).toBe(0);
  });

  it("MQTT 5 3.1.3.2.2: the will goes at the earlier of its delay and the session's end", () => {
    vi.useFakeTimers();
    try {
      // Session Expiry 0, Will Delay 5 s: the session ends at the drop, and so the will goes then.
      const short = serving({ sessionExpirySec: 0, will: { ...will, delayMs: 5_000 } });
      short.actor.send({ type: "SOCKET_CLOSED" });
      vi.advanceTimersByTime(1);
      expect(short.types()).toContain("publish_will");
      // Session Expiry 5 s, Will Delay 3 s: the delay comes first.
      const delayed = serving({ sessionExpirySec: 5, will: { ...will, delayMs: 3_000 } });
      delayed.actor.send({ type: "SOCKET_CLOSED" });
      vi.advanceTimersByTime(2_999);
      expect(delayed.types()).not.toContain("publish_will");
      vi.advanceTimersByTime(2);
      expect(delayed.types()).toContain("publish_will");
      // Session Expiry 2 s, Will Delay 60 s: the session's end comes first.
      const ends = serving({ sessionExpirySec: 2, will: { ...will, delayMs: 60_000 } });
      ends.actor.send({ type: "SOCKET_CLOSED" });
      vi.advanceTimersByTime(2_001);
      expect(ends.types()).toContain("publish_will");
    } finally {
      vi.useRealTimers();
    }
  });
});
