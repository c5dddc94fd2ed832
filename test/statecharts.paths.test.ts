import { describe, expect, it } from "vitest";
import { countIn, type EdgeRef, edgesTaken, type TransitionView, within } from "../src/statecharts/paths.js";

// The arrows of a small chart as svg.ts marks them: an initial marker, a compound state,
// an `always` hop, and a transition on the machine itself (from the "any state" box, "").
const edges: EdgeRef[] = [
  { from: "*", to: "idle", events: [] },
  { from: "idle", to: "session", events: ["CONNECT"] },
  { from: "*session", to: "session.opening", events: [] },
  { from: "session.opening", to: "session.serving", events: ["READY"] },
  { from: "session", to: "kicked", events: ["KICK"] },
  { from: "kicked", to: "closed", events: ["always"] },
  { from: "session.serving", to: "closed", events: ["DISCONNECT", "SOCKET_CLOSED"] },
  { from: "", to: "closed", events: ["SHUTDOWN"] },
];
const t = (event: string, from: string, to: string): TransitionView => ({
  machine: "m",
  actor: "a",
  at: 0,
  event,
  from,
  to,
});

describe("the live page's reading of recorded transitions", () => {
  it("finds the arrow each transition took: the start, events, parents' arrows, the machine's own", () => {
    expect(
      edgesTaken(edges, [
        t("xstate.init", "", "idle"),
        t("CONNECT", "idle", "session.opening"),
        t("READY", "session.opening", "session.serving"),
        t("SHUTDOWN", "session.serving", "closed"),
        t("left", "closed", ""),
      ]),
    ).toEqual([[0], [1], [3], [7], []]);
  });

  it("draws a step the record folded an always hop into as its event's arrow and the always arrow after it", () => {
    // KICK went to kicked and on through `always` to closed: recorded as one step.
    expect(edgesTaken(edges, [t("KICK", "session.serving", "closed")])).toEqual([[4, 5]]);
    // A start that went on at once: the initial arrow, then the hop.
    const starting: EdgeRef[] = [
      { from: "*", to: "claiming", events: [] },
      { from: "claiming", to: "loading", events: ["always"] },
      { from: "claiming", to: "loading", events: ["CLAIMED"] },
      { from: "loading.reading", to: "deciding", events: ["LOADED"] },
      { from: "deciding", to: "discarding", events: ["always"] },
      { from: "deciding", to: "fresh", events: ["always"] },
      { from: "fresh", to: "attached", events: ["always"] },
    ];
    expect(
      edgesTaken(starting, [t("xstate.init", "", "loading.reading"), t("LOADED", "loading.reading", "attached")]),
    ).toEqual([
      [0, 1],
      [3, 5, 6],
    ]);
    // No arrow with the event: any arrow between the two states; none at all: nothing drawn.
    expect(edgesTaken(edges, [t("SOMETHING", "session.serving", "closed")])).toEqual([[6]]);
    expect(edgesTaken(edges, [t("NO_SUCH", "idle", "idle")])).toEqual([[]]);
  });

  it("counts a parent with its children, each actor once, parallel regions included", () => {
    const counts = { m: { "session.serving": 2, "session.opening": 1, "par.a.x | par.b.y": 4 } };
    expect(countIn(counts, "m", "session")).toBe(3);
    expect(countIn(counts, "m", "session.serving")).toBe(2);
    expect(countIn(counts, "m", "par")).toBe(4);
    expect(countIn(counts, "m", "par.b.y")).toBe(4);
    expect(countIn(counts, "m", "sess")).toBe(0);
    expect(within("session.serving", "")).toBe(true);
  });
});
