/**
 * A selector's AST -> a predicate over a message's FilterView, with SQL's three-valued
 * logic (JMS 2.0, 3.8.1.2): a missing field is unknown, a comparison or arithmetic with
 * unknown is unknown, and a message is selected only when the whole selector is true.
 * LIKE patterns are compiled once, at attach (amqpLike.ts). Each node is visited at most
 * once per message. Pure.
 */
import type { FilterValue, FilterView } from "./amqpFilterView.js";
import { compileLike } from "./amqpLike.js";
import type { Field, SelectorNode } from "./amqpSelector.js";

/** undefined is SQL's unknown (and null). */
type V = FilterValue | undefined;
type Eval = (view: FilterView) => V;

/** JMS 3.4.10: a message without a priority has the default, 4. */
const DEFAULT_PRIORITY = 4;

function read(field: Field): Eval {
  switch (field.section) {
    case "header":
      return field.name === "priority" ? (m) => m.priority ?? DEFAULT_PRIORITY : (m) => m.durable ?? false;
    case "properties": {
      const name = field.name;
      return (m) => m.properties.get(name);
    }
    case "application": {
      const name = field.name;
      return (m) => m.application.get(name);
    }
  }
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/** = and <>: like types only; unlike types are not equal (JMS: the comparison is false). */
function equal(a: FilterValue, b: FilterValue): boolean | undefined {
  if (a instanceof Uint8Array || b instanceof Uint8Array)
    return a instanceof Uint8Array && b instanceof Uint8Array ? sameBytes(a, b) : undefined;
  return typeof a === typeof b ? a === b : undefined;
}

const not3 = (v: V): V => (v === true ? false : v === false ? true : undefined);

function compile(n: SelectorNode): Eval {
  switch (n.k) {
    case "lit": {
      const v = n.v;
      return () => v;
    }
    case "id":
      return read(n.field);
    case "not": {
      const e = compile(n.e);
      return (m) => not3(e(m));
    }
    case "and": {
      const l = compile(n.l);
      const r = compile(n.r);
      return (m) => {
        const a = l(m);
        if (a === false) return false;
        const b = r(m);
        if (b === false) return false;
        return a === true && b === true ? true : undefined;
      };
    }
    case "or": {
      const l = compile(n.l);
      const r = compile(n.r);
      return (m) => {
        const a = l(m);
        if (a === true) return true;
        const b = r(m);
        if (b === true) return true;
        return a === false && b === false ? false : undefined;
      };
    }
    case "cmp": {
      const l = compile(n.l);
      const r = compile(n.r);
      const op = n.op;
      return (m) => {
        const a = l(m);
        const b = r(m);
        if (a === undefined || b === undefined) return undefined;
        if (op === "=" || op === "<>") {
          const eq = equal(a, b);
          return eq === undefined ? false : op === "=" ? eq : !eq;
        }
        if (typeof a !== "number" || typeof b !== "number") return false;
        return op === "<" ? a < b : op === ">" ? a > b : op === "<=" ? a <= b : a >= b;
      };
    }
    case "arith": {
      const l = compile(n.l);
      const r = compile(n.r);
      const op = n.op;
      return (m) => {
        const a = l(m);
        const b = r(m);
        if (typeof a !== "number" || typeof b !== "number") return undefined;
        if (op === "/") return b === 0 ? undefined : a / b;
        return op === "+" ? a + b : op === "-" ? a - b : a * b;
      };
    }
    case "neg": {
      const e = compile(n.e);
      return (m) => {
        const v = e(m);
        return typeof v === "number" ? -v : undefined;
      };
    }
    case "between": {
      const e = compile(n.e);
      const lo = compile(n.lo);
      const hi = compile(n.hi);
      const flip = n.not;
      return (m) => {
        const v = e(m);
        const a = lo(m);
        const b = hi(m);
        if (v === undefined || a === undefined || b === undefined) return undefined;
        const inside = typeof v === "number" && typeof a === "number" && typeof b === "number" && a <= v && v <= b;
        return flip ? !inside : inside;
      };
    }
    case "in": {
      const e = compile(n.e);
      const set = new Set<unknown>(n.list);
      const flip = n.not;
      return (m) => {
        const v = e(m);
        if (v === undefined) return undefined;
        const found = set.has(v);
        return flip ? !found : found;
      };
    }
    case "like": {
      const e = compile(n.e);
      const match = compileLike(n.pattern, n.escape);
      const flip = n.not;
      return (m) => {
        const v = e(m);
        if (typeof v !== "string") return undefined;
        const found = match(v);
        return flip ? !found : found;
      };
    }
    case "null": {
      const e = compile(n.e);
      const flip = n.not;
      return (m) => (e(m) === undefined) !== flip;
    }
  }
}

/** The predicate of a parsed selector: true selects the message; false and unknown do not. */
export function compileSelector(ast: SelectorNode): (view: FilterView) => boolean {
  const e = compile(ast);
  return (m) => e(m) === true;
}

/** The three-valued answer itself, for tests of the logic (true, false, or undefined for unknown). */
export function evaluateSelector(ast: SelectorNode, view: FilterView): boolean | undefined {
  const v = compile(ast)(view);
  return v === true ? true : v === false ? false : undefined;
}
