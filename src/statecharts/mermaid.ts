import type { AnyStateMachine, AnyStateNode } from "xstate";
import { transitionLabel } from "./transitionLabel.js";

/**
 * A machine's own definition as a Mermaid state diagram: states, initial states, final
 * states, and every transition with its event, delay or guard. Deterministic output, so
 * a committed chart can be compared with what the code generates.
 */
export function toMermaid(machine: AnyStateMachine): string {
  const lines: string[] = ["stateDiagram-v2"];
  renderChildren(machine.root, lines, "  ");
  if (machine.root.transitions.size > 0 || (machine.root.always?.length ?? 0) > 0) {
    // A transition on the machine itself applies in every state: drawn from one "any state" box.
    lines.push(
      `  state "any state" as ${ANY_STATE}`,
      `  class ${ANY_STATE} anyState`,
      "  classDef anyState stroke-dasharray: 4 4",
    );
  }
  renderTransitions(machine.root, lines);
  return `${lines.join("\n")}\n`;
}

// Mermaid keeps the id `root` for the diagram itself: a state named so breaks the drawing.
const ANY_STATE = "any_state";

function nodeId(node: AnyStateNode): string {
  return node.path.length === 0 ? ANY_STATE : node.path.join("_");
}

function renderChildren(parent: AnyStateNode, lines: string[], indent: string): void {
  const children = Object.values(parent.states) as AnyStateNode[];
  if (children.length === 0) return;
  const initial = parent.config.initial;
  if (typeof initial === "string") lines.push(`${indent}[*] --> ${nodeId(parent.states[initial] as AnyStateNode)}`);
  for (const child of children) {
    const id = nodeId(child);
    if (Object.keys(child.states).length > 0) {
      lines.push(`${indent}state "${child.key}" as ${id} {`);
      renderChildren(child, lines, `${indent}  `);
      lines.push(`${indent}}`);
    } else {
      lines.push(`${indent}state "${child.key}" as ${id}`);
    }
    if (child.type === "final") lines.push(`${indent}${id} --> [*]`);
  }
}

function renderTransitions(node: AnyStateNode, lines: string[]): void {
  for (const [event, defs] of node.transitions) {
    for (const t of defs) {
      for (const target of t.target ?? []) {
        lines.push(`  ${nodeId(node)} --> ${nodeId(target)}: ${transitionLabel(event, t.guard)}`);
      }
    }
  }
  for (const t of node.always ?? []) {
    for (const target of t.target ?? [])
      lines.push(`  ${nodeId(node)} --> ${nodeId(target)}: ${transitionLabel("always", t.guard)}`);
  }
  for (const child of Object.values(node.states) as AnyStateNode[]) renderTransitions(child, lines);
}
