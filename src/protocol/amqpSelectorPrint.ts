/**
 * A selector's AST -> selector text that parses back to the same AST (every operation
 * in parentheses): what the gateway logs for an accepted selector, and what the parser's
 * round-trip property checks against. Pure.
 */
import type { Field, Literal, SelectorNode } from "./amqpSelector.js";

const SECTION_PREFIX: Readonly<Record<Field["section"], string>> = {
  header: "header.",
  properties: "properties.",
  application: "a.",
};

function literal(v: Literal): string {
  if (typeof v === "string") return `'${v.replaceAll("'", "''")}'`;
  if (typeof v === "boolean") return v ? "TRUE" : "FALSE";
  return String(v);
}

export function printSelector(n: SelectorNode): string {
  switch (n.k) {
    case "lit":
      return literal(n.v);
    case "id":
      return `${SECTION_PREFIX[n.field.section]}${n.field.name}`;
    case "not":
      return `(NOT ${printSelector(n.e)})`;
    case "and":
    case "or":
      return `(${printSelector(n.l)} ${n.k.toUpperCase()} ${printSelector(n.r)})`;
    case "cmp":
    case "arith":
      return `(${printSelector(n.l)} ${n.op} ${printSelector(n.r)})`;
    case "neg":
      return `(-${printSelector(n.e)})`;
    case "between":
      return `(${printSelector(n.e)}${n.not ? " NOT" : ""} BETWEEN ${printSelector(n.lo)} AND ${printSelector(n.hi)})`;
    case "in":
      return `(${printSelector(n.e)}${n.not ? " NOT" : ""} IN (${n.list.map(literal).join(", ")}))`;
    case "like":
      return `(${printSelector(n.e)}${n.not ? " NOT" : ""} LIKE ${literal(n.pattern)}${n.escape !== undefined ? ` ESCAPE ${literal(n.escape)}` : ""})`;
    case "null":
      return `(${printSelector(n.e)} IS${n.not ? " NOT" : ""} NULL)`;
  }
}
