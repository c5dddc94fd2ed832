import { describe, expect, it, vi } from "vitest";
import { type ConnectRequest, effectiveKeepalive, mqttConnectionMachine } from "../../src/machines/mqttConnection.js";
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
const will = { topic: "w", payload: new Uint8Array(), qos: 0 as const, retain: false, delayMs: 0 };

function serving(extra: Partial<ConnectRequest> = {}) {
  const d = drive(mqttConnectionMachine, input);
  d.actor.send({ type: "CONNECT", request: request(extra) });
  d.actor.send({ type: "NATS_READY", sessionPresent: false, account: "" });
  return d;
}

describe("mqttConnection machine", () => {
  it("CONNECT -> authenticating -> CONNACK 0 -> serving", () => {
    const d = serving();
    expect(d.actor.getSnapshot().matches("serving")).toBe(true);
    expect(d.types()).toEqual(["acquire_nats", "connack", "serve"]);
  });

  it("a NATS auth refusal answers CONNACK 0x86 (v5) / 4 (3.1.1) and closes", () => {
    for (const [version, code] of [[5, 0x86], [4, 4]] as const) {
      const d = drive(mqttConnectionMachine, input);
      d.actor.send({ type: "CONNECT", request: request({ protocolVersion: version }) });
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
      d.actor.send({ type: "TAKEN_OVER" });
      vi.advanceTimersByTime(10_000);
      expect(d.types()).not.toContain("publish_will");
    } finally {
      vi.useRealTimers();
    }
  });

  it("keep alive expiry (told by the edge's clock, keepaliveWheel.ts) disconnects with 0x8d and serves once", () => {
    const d = serving({ keepaliveSec: 10 });
    expect(d.actor.getSnapshot().matches({ serving: { keepalive: "waiting" } })).toBe(true);
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
      request: request({ protocolVersion, keepaliveSec }),
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
    expect(s.actor.getSnapshot().matches("serving")).toBe(true);
  });
});
