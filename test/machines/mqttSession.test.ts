import { describe, expect, it, vi } from "vitest";
import { mqttSessionMachine } from "../../src/machines/mqttSession.js";
import { drive } from "./emitted.js";

/** A session machine that has claimed its client id (no earlier session here). */
function claimed(input: { cleanStart: boolean; expirySec: number; nothingStored?: boolean }) {
  const d = drive(mqttSessionMachine, input);
  d.actor.send({ type: "CLAIMED" });
  return d;
}

describe("mqttSession machine", () => {
  it("claims the client id first and reads the store only once it is claimed", () => {
    const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    expect(d.types()).toEqual(["claim"]);
    // An earlier session of the id is still being saved: nothing is read, whatever happens meanwhile.
    expect(d.actor.getSnapshot().value).toBe("claiming");
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    expect(d.types()).toEqual(["claim"]);
    d.actor.send({ type: "CLAIMED" });
    expect(d.types()).toEqual(["claim", "load"]);
  });

  it("a session whose claim is granted as it starts reads the store in its first step, and ignores a late CLAIMED", () => {
    const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60, claimedAtStart: true });
    expect(d.types()).toEqual(["claim", "load"]);
    expect(d.actor.getSnapshot().matches("loading")).toBe(true);
    d.actor.send({ type: "CLAIMED" });
    expect(d.types()).toEqual(["claim", "load"]);
    // A clean start with nothing stored is served in that same step.
    const fresh = drive(mqttSessionMachine, {
      cleanStart: true,
      expirySec: 0,
      nothingStored: true,
      claimedAtStart: true,
    });
    expect(fresh.types()).toEqual(["claim", "ready"]);
    expect(fresh.actor.getSnapshot().value).toBe("attached");
  });

  it("a connection that goes while its session waits for the claim leaves nothing to save", () => {
    const d = drive(mqttSessionMachine, { cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "DETACH", expirySec: 60 });
    expect(d.actor.getSnapshot().value).toBe("ended");
    expect(d.types()).toEqual(["claim"]);
  });

  it("a stored session resumes: load -> resume -> ready(session present)", () => {
    const d = claimed({ cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    d.actor.send({ type: "RESUMED" });
    expect(d.types()).toEqual(["claim", "load", "resume", "ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(true);
  });

  it("a clean start with nothing stored is fresh once claimed: no load, ready without session present", () => {
    const d = claimed({ cleanStart: true, expirySec: 0, nothingStored: true });
    expect(d.types()).toEqual(["claim", "ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(false);
    expect(d.actor.getSnapshot().value).toBe("attached");
    // Without clean start the store is read whatever the edge believes.
    const p = claimed({ cleanStart: false, expirySec: 60, nothingStored: true });
    expect(p.types()).toEqual(["claim", "load"]);
  });

  it("a clean start discards a stored session and starts fresh", () => {
    const d = claimed({ cleanStart: true, expirySec: 0 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    d.actor.send({ type: "DISCARDED" });
    expect(d.types()).toEqual(["claim", "load", "discard", "ready"]);
    expect(d.emitted.at(-1)?.sessionPresent).toBe(false);
  });

  it("an expired session is discarded even without clean start", () => {
    const d = claimed({ cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: true } });
    expect(d.types()).toEqual(["claim", "load", "discard"]);
  });

  it("a session held on another gateway: asked for, then read again once it let go", () => {
    const d = claimed({ cleanStart: false, expirySec: 60 });
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false, heldBy: "gw-2" } });
    expect(d.emitted.at(-1)).toEqual({ type: "ask_owner", owner: "gw-2" });
    d.actor.send({ type: "OWNER_RELEASED" });
    // What the owner saved on its way out is what resumes.
    expect(d.types()).toEqual(["claim", "load", "ask_owner", "load"]);
    d.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    expect(d.types()).toContain("resume");
  });

  it("an owner that does not answer is gone: the session is taken as it is; silence past the bound likewise", () => {
    const gone = claimed({ cleanStart: false, expirySec: 60 });
    gone.actor.send({ type: "LOADED", found: { exists: true, expired: false, heldBy: "gw-2" } });
    gone.actor.send({ type: "OWNER_GONE" });
    expect(gone.types()).toEqual(["claim", "load", "ask_owner", "resume"]);
    vi.useFakeTimers();
    try {
      const d = claimed({ cleanStart: false, expirySec: 60 });
      d.actor.send({ type: "LOADED", found: { exists: true, expired: false, heldBy: "gw-2" } });
      vi.advanceTimersByTime(8_001);
      expect(d.types()).toContain("resume");
    } finally {
      vi.useRealTimers();
    }
  });

  it("a store that refuses (permissions) refuses a persistent session at once but serves a clean one", () => {
    const p = claimed({ cleanStart: false, expirySec: 60 });
    p.actor.send({ type: "LOAD_FAILED", reason: "permissions violation", waitable: false });
    expect(p.types()).toEqual(["claim", "load", "refuse"]);
    const c = claimed({ cleanStart: true, expirySec: 0 });
    c.actor.send({ type: "LOAD_FAILED", reason: "timeout", waitable: true });
    expect(c.types()).toEqual(["claim", "load", "ready"]);
  });

  it("a store that does not answer is read again, waits doubling from 250 ms to 2 s, until it answers or 15 s pass", () => {
    vi.useFakeTimers();
    try {
      const answers = claimed({ cleanStart: false, expirySec: 60 });
      const reads = () => answers.types().filter((t) => t === "load").length;
      const waits: number[] = [];
      for (let n = 1; n <= 5; n++) {
        answers.actor.send({ type: "LOAD_FAILED", reason: "timeout", waitable: true });
        expect(answers.actor.getSnapshot().matches({ loading: "waiting" })).toBe(true);
        const before = Date.now();
        while (reads() === n) vi.advanceTimersByTime(50);
        waits.push(Date.now() - before);
      }
      expect(waits).toEqual([250, 500, 1000, 2000, 2000]);
      answers.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
      answers.actor.send({ type: "RESUMED" });
      expect(answers.emitted.at(-1)).toEqual({ type: "ready", sessionPresent: true });

      // Never answering: refused at the bound, with the last reason; a read still out is not waited for.
      const silent = claimed({ cleanStart: false, expirySec: 60 });
      silent.actor.send({ type: "LOAD_FAILED", reason: "no responders", waitable: true });
      vi.advanceTimersByTime(14_999);
      expect(silent.types()).not.toContain("refuse");
      vi.advanceTimersByTime(1);
      expect(silent.emitted.at(-1)).toEqual({
        type: "refuse",
        reason: "the session store did not answer within 15 s (no responders)",
      });
      // A connection that goes while its session waits for the store leaves nothing behind.
      const gone = claimed({ cleanStart: false, expirySec: 60 });
      gone.actor.send({ type: "LOAD_FAILED", reason: "timeout", waitable: true });
      gone.actor.send({ type: "DETACH", expirySec: 60 });
      expect(gone.actor.getSnapshot().value).toBe("ended");
    } finally {
      vi.useRealTimers();
    }
  });

  it("at detach the expiry then decides: kept (with it), removed (stored, now 0), or nothing (never stored)", () => {
    const durable = claimed({ cleanStart: false, expirySec: 60 });
    durable.actor.send({ type: "LOADED", found: { exists: false, expired: false } });
    durable.actor.send({ type: "DETACH", expirySec: 300 });
    durable.actor.send({ type: "SAVED" });
    expect(durable.types()).toEqual(["claim", "load", "ready", "stop_delivery", "save_detached"]);
    expect(durable.emitted.at(-1)?.expirySec).toBe(300);
    expect(durable.actor.getSnapshot().value).toBe("kept");
    // A v5 DISCONNECT with Session Expiry 0 ends a session that had one: it leaves the store.
    const ending = claimed({ cleanStart: false, expirySec: 60 });
    ending.actor.send({ type: "LOADED", found: { exists: false, expired: false } });
    ending.actor.send({ type: "DETACH", expirySec: 0 });
    ending.actor.send({ type: "REMOVED" });
    expect(ending.types()).toEqual(["claim", "load", "ready", "stop_delivery", "remove"]);
    expect(ending.actor.getSnapshot().value).toBe("ended");
    // MQTT 5 3.1.2.11.2: resumed with expiry 0, the stored session ends with this connection.
    const resumedForNow = claimed({ cleanStart: false, expirySec: 0 });
    resumedForNow.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
    resumedForNow.actor.send({ type: "RESUMED" });
    resumedForNow.actor.send({ type: "DETACH", expirySec: 0 });
    resumedForNow.actor.send({ type: "REMOVED" });
    expect(resumedForNow.types()).toEqual(["claim", "load", "resume", "ready", "stop_delivery", "remove"]);
    expect(resumedForNow.actor.getSnapshot().value).toBe("ended");
    const clean = claimed({ cleanStart: true, expirySec: 0, nothingStored: true });
    clean.actor.send({ type: "DETACH", expirySec: 0 });
    expect(clean.types()).toEqual(["claim", "ready", "stop_delivery"]);
    expect(clean.actor.getSnapshot().value).toBe("ended");
  });

  it("a detached session says so while it saves or removes itself (tag detached): its actor sends no second DETACH", () => {
    for (const expirySec of [300, 0]) {
      const s = claimed({ cleanStart: false, expirySec: 60 });
      s.actor.send({ type: "LOADED", found: { exists: true, expired: false } });
      s.actor.send({ type: "RESUMED" });
      expect(s.actor.getSnapshot().hasTag("detached")).toBe(false);
      s.actor.send({ type: "DETACH", expirySec });
      expect(s.actor.getSnapshot().hasTag("detached")).toBe(true);
    }
  });
});
