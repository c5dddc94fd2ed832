import elkBundled from "elkjs/lib/elk.bundled.js";
import type { ELK, ELKConstructorArguments, ElkExtendedEdge, ElkLabel, ElkNode } from "elkjs/lib/elk-api.js";
import type { AnyStateMachine, AnyStateNode } from "xstate";
import { transitionLabel } from "./transitionLabel.js";

/**
 * A machine laid out by ELK's layered algorithm: every state a box at its place (compound
 * states hold their children), every transition a routed line. What svg.ts draws, and
 * what the live page marks by the `path` of each state.
 */
export interface ChartLayout {
  readonly id: string;
  readonly width: number;
  readonly height: number;
  readonly states: readonly StateBox[];
  readonly edges: readonly EdgeLine[];
}

export interface StateBox {
  /** Dotted path (`session.serving`); "" for the "any state" box, `*<parent path>` for an initial marker. */
  readonly path: string;
  readonly name: string;
  readonly kind: "atomic" | "compound" | "parallel" | "region" | "final" | "initial" | "any";
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface EdgeLine {
  readonly from: string;
  readonly to: string;
  /** The events as xstate names them (the live page matches recorded transitions by these). */
  readonly events: readonly string[];
  /** One line per transition: `CONNECT`, `after willDelay`, `DISCONNECT [asksForWill]`. */
  readonly labels: readonly string[];
  readonly points: ReadonlyArray<readonly [number, number]>;
  readonly labelBoxes: ReadonlyArray<{ x: number; y: number; width: number; height: number; text: string }>;
}

/** Sizes the drawing uses; text widths are estimated for a monospace face (0.6 em a character). */
export const STATE_FONT = 15;
export const LABEL_FONT = 12;
const CHAR = 0.6;
const LINE = 1.35;
const STATE_PAD_X = 14;
const STATE_HEIGHT = 34;
const HEADER = STATE_FONT * LINE + 12;
export const ANY_STATE = "";

// elkjs is CommonJS whose types say `export default`: under NodeNext the default import is the constructor itself.
const Elk = elkBundled as unknown as new (args?: ELKConstructorArguments) => ELK;

const textWidth = (text: string, size: number) => Math.ceil(text.length * size * CHAR);

/** A state node's ELK id: its path, so edges and boxes name states the way counts do. */
const idOf = (node: AnyStateNode) => (node.path.length === 0 ? ANY_STATE : node.path.join("."));
const initialId = (parent: AnyStateNode) => `*${idOf(parent)}`;

export async function layoutMachine(machine: AnyStateMachine): Promise<ChartLayout> {
  const kinds = new Map<string, StateBox["kind"]>();
  const names = new Map<string, string>();
  const parentOf = new Map<string, string>();
  const root: ElkNode = {
    id: "root",
    layoutOptions: {
      "elk.algorithm": "layered",
      "elk.direction": "DOWN",
      "elk.hierarchyHandling": "INCLUDE_CHILDREN",
      "elk.edgeRouting": "ORTHOGONAL",
      "elk.spacing.nodeNode": "28",
      "elk.layered.spacing.nodeNodeBetweenLayers": "36",
      "elk.spacing.edgeLabel": "4",
      "elk.edgeLabels.inline": "true",
      "elk.layered.edgeLabels.centerLabelPlacementStrategy": "TAIL_LAYER",
      "elk.spacing.edgeEdge": "12",
      "elk.layered.spacing.edgeNodeBetweenLayers": "18",
      "elk.layered.spacing.edgeEdgeBetweenLayers": "12",
      "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX",
      "elk.json.shapeCoords": "ROOT",
      "elk.json.edgeCoords": "ROOT",
      "elk.padding": "[top=12,left=12,bottom=12,right=12]",
    },
    children: [],
    edges: [],
  };
  const elkNodes = new Map<string, ElkNode>([["root", root]]);

  const addState = (node: AnyStateNode, into: ElkNode) => {
    const id = idOf(node);
    const children = Object.values(node.states) as AnyStateNode[];
    const parentIsParallel = node.parent?.type === "parallel";
    const kind: StateBox["kind"] =
      children.length === 0
        ? node.type === "final"
          ? "final"
          : "atomic"
        : node.type === "parallel"
          ? "parallel"
          : parentIsParallel
            ? "region"
            : "compound";
    kinds.set(id, kind);
    names.set(id, node.key);
    parentOf.set(id, into.id);
    const elk: ElkNode = { id, labels: [{ text: node.key }] };
    if (children.length === 0) {
      elk.width = textWidth(node.key, STATE_FONT) + 2 * STATE_PAD_X + (kind === "final" ? 8 : 0);
      elk.height = STATE_HEIGHT;
    } else {
      elk.layoutOptions = {
        "elk.padding": `[top=${HEADER + 8},left=14,bottom=14,right=14]`,
        "elk.nodeSize.constraints": "MINIMUM_SIZE",
        "elk.nodeSize.minimum": `(${textWidth(node.key, STATE_FONT) + 2 * STATE_PAD_X},${HEADER + 20})`,
        // Regions of a parallel state sit side by side, as they run.
        ...(kind === "parallel" ? { "elk.direction": "RIGHT" } : {}),
      };
      elk.children = [];
      elk.edges = [];
      elkNodes.set(id, elk);
      addChildren(node, elk);
    }
    into.children!.push(elk);
  };

  const addChildren = (parent: AnyStateNode, into: ElkNode) => {
    const initial = parent.config.initial;
    if (typeof initial === "string" && parent.type !== "parallel") {
      const marker = initialId(parent);
      kinds.set(marker, "initial");
      names.set(marker, "");
      parentOf.set(marker, into.id);
      into.children!.push({ id: marker, width: 14, height: 14 });
      pending.push({ from: marker, to: idOf(parent.states[initial] as AnyStateNode), events: [], labels: [] });
    }
    for (const child of Object.values(parent.states) as AnyStateNode[]) addState(child, into);
  };

  const pending: Array<{ from: string; to: string; events: string[]; labels: string[] }> = [];
  addChildren(machine.root, root);
  collectTransitions(machine.root, pending);
  if (pending.some((e) => e.from === ANY_STATE)) {
    kinds.set(ANY_STATE, "any");
    names.set(ANY_STATE, "any state");
    parentOf.set(ANY_STATE, "root");
    root.children!.push({
      id: ANY_STATE,
      width: textWidth("any state", STATE_FONT) + 2 * STATE_PAD_X,
      height: STATE_HEIGHT,
    });
  }

  // One line per pair of states, however many events take it: five ways to `closed` are one arrow.
  const merged = new Map<string, { from: string; to: string; events: string[]; labels: string[] }>();
  for (const e of pending) {
    const key = `${e.from}\n${e.to}`;
    const m = merged.get(key);
    if (m) {
      m.events.push(...e.events);
      m.labels.push(...e.labels);
    } else merged.set(key, { ...e, events: [...e.events], labels: [...e.labels] });
  }
  const lines = [...merged.values()];
  lines.forEach((e, i) => {
    const labels: ElkLabel[] = e.labels.length
      ? [
          {
            id: `label${i}`,
            text: e.labels.join("\n"),
            width: Math.max(...e.labels.map((l) => textWidth(l, LABEL_FONT))) + 6,
            height: Math.ceil(e.labels.length * LABEL_FONT * LINE) + 2,
          },
        ]
      : [];
    const edge: ElkExtendedEdge = { id: `edge${i}`, sources: [e.from], targets: [e.to], labels };
    elkNodes.get(container(e.from, e.to, parentOf))!.edges!.push(edge);
  });

  const laid = await new Elk().layout(root);
  const states: StateBox[] = [];
  const walk = (node: ElkNode) => {
    for (const c of node.children ?? []) {
      states.push({
        path: c.id,
        name: names.get(c.id) ?? c.id,
        kind: kinds.get(c.id) ?? "atomic",
        x: c.x ?? 0,
        y: c.y ?? 0,
        width: c.width ?? 0,
        height: c.height ?? 0,
      });
      walk(c);
    }
  };
  walk(laid);
  const edges: EdgeLine[] = [];
  const byId = new Map<string, ElkExtendedEdge>();
  const walkEdges = (node: ElkNode) => {
    for (const e of node.edges ?? []) byId.set(e.id, e);
    for (const c of node.children ?? []) walkEdges(c);
  };
  walkEdges(laid);
  lines.forEach((e, i) => {
    const out = byId.get(`edge${i}`);
    const points: Array<[number, number]> = [];
    for (const s of out?.sections ?? []) {
      points.push([s.startPoint.x, s.startPoint.y]);
      for (const b of s.bendPoints ?? []) points.push([b.x, b.y]);
      points.push([s.endPoint.x, s.endPoint.y]);
    }
    const labelBoxes = (out?.labels ?? []).map((l) => ({
      x: l.x ?? 0,
      y: l.y ?? 0,
      width: l.width ?? 0,
      height: l.height ?? 0,
      text: l.text ?? "",
    }));
    edges.push({ from: e.from, to: e.to, events: e.events, labels: e.labels, points, labelBoxes });
  });
  return { id: machine.id, width: Math.ceil(laid.width ?? 0), height: Math.ceil(laid.height ?? 0), states, edges };
}

/** The ELK node an edge belongs in: the innermost one holding both ends (ELK routes it there). */
function container(from: string, to: string, parentOf: ReadonlyMap<string, string>): string {
  const chain = (id: string) => {
    const out: string[] = [];
    for (let p = parentOf.get(id); p !== undefined; p = parentOf.get(p)) out.push(p);
    return out;
  };
  const fromChain = chain(from);
  // An edge from a compound state to its own child lives in that state.
  if (chain(to).includes(from)) return from;
  if (fromChain.includes(to)) return to;
  const toChain = new Set(chain(to));
  return fromChain.find((p) => toChain.has(p)) ?? "root";
}

function collectTransitions(
  node: AnyStateNode,
  out: Array<{ from: string; to: string; events: string[]; labels: string[] }>,
): void {
  for (const [event, defs] of node.transitions) {
    for (const t of defs)
      for (const target of t.target ?? [])
        out.push({ from: idOf(node), to: idOf(target), events: [event], labels: [transitionLabel(event, t.guard)] });
  }
  for (const t of node.always ?? [])
    for (const target of t.target ?? [])
      out.push({
        from: idOf(node),
        to: idOf(target),
        events: ["always"],
        labels: [transitionLabel("always", t.guard)],
      });
  for (const child of Object.values(node.states) as AnyStateNode[]) collectTransitions(child, out);
}
