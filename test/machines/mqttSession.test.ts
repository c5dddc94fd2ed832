import { describe, expect, it, vi } from "vitest";
import { mqttSessionMachine } from "../../src/machines/mqttSession.js";
import { drive } from "./emitted.js";

describe("mqttSession machine", () => {
  it("a stored session resumes: load -> resume -> ready(session present)", () => {
    const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    d.actor.send({ type: "RESUMED" });
    expect(d.types()).toEqual(["load", "resume", "ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(true);
  });

  it("a clean start with nothing stored is fresh at once: no load, ready without session present", () => {
    const d = drive(mqttSessionMachine, { cleanStart: true, expirySec: 0, nothingStored: true });
    expect(d.types()).toEqual(["ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(false);
    expect(d.actor.getSnapshot().value).toBe("attached");
    // Without clean start the store is read whatever the edge believes.
    const p = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60, nothingStored: true });
    expect(p.types()).toEqual(["load"]);
  });

  it("a clean start discards a stored session and starts fresh", () => {
    const d = drive(mqttSessionMachine, { cleanStart: true, expirySec: 0 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    d.actor.send({ type: "DISCARDED" });
    expect(d.types()).toEqual(["load", "discard", "ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(false);
  });

  it("an expired session is discarded even without clean start", () => {
    const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: true } });
    expect(d.types()).toEqual(["load", "discard"]);
  });

  it("a session held on another gateway is asked for first; silence counts as dead", () => {
    vi.useFakeTimers();
    try {
      const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
      d.actor.send({ type: "LOADED", found: { exists: true, expired: false, heldBy: "gw-2" } });
      expect(d.emitted.at(-1)).toEqual({ type: "ask_owner", owner: "gw-2" });
      vi.advanceTimersByTime(2_001);
      expect(d.types()).toContain("resume");
    } finally {
      vi.useRealTimers();
    }
  });

  it("a store that cannot be read refuses a persistent session but serves a clean one", () => {
    const p = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    p.actor.send({ type: "LOAD_FAILED", reason: "no JetStream" });
    expect(p.types()).toEqual(["load", "refuse"]);
    const c = drive(mqttSessionMachine, { cleanStart: true, expirySec: 0 });
    c.actor.send({ type: "LOAD_FAILED", reason: "no JetStream" });
    expect(c.types()).toEqual(["load", "ready"]);
  });

  it("at detach a durable session is saved, a clean one removes its consumers", () => {
    const durable = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    durable.actor.send({ type: "LOADED", found: { exists: false, expired: false } });
    durable.actor.send({ type: "DETACH" });
    durable.actor.send({ type: "SAVED" });
    expect(durable.types()).toEqual(["load", "ready", "stop_delivery", "save_detached"]);
    expect(durable.actor.getSnapshot().value).toBe("kept");
    const clean = drive(mqttSessionMachine, { cleanStart: true, expirySec: 0 });
    clean.actor.send({ type: "LOADED", found: { exists: false, expired: false } });
    clean.actor.send({ type: "DETACH" });
    clean.actor.send({ type: "REMOVED" });
    expect(clean.types()).toEqual(["load", "ready", "stop_delivery", "remove"]);
    expect(clean.actor.getSnapshot().value).toBe("ended");
  });
});
