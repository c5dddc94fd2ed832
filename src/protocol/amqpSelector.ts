/**
 * A JMS message selector (apache.org:selector-filter:string) or an AMQP SQL filter
 * (amqp:sql-filter, filtex 6) -> an AST, with a cost bound checked while parsing: the
 * text, the nodes, the nesting and every LIKE pattern are bounded, so evaluating one
 * message costs at most the nodes plus, per LIKE, the value's length times the pattern's
 * (amqpSelectorEval.ts; docs/decisions/amqp-filters.md). Pure.
 *
 * Grammar (SQL-92 subset of JMS 2.0, 3.8.1.1): OR, AND, NOT; = <> != < > <= >=; + - * /;
 * unary + -; BETWEEN, IN, LIKE ... ESCAPE, IS [NOT] NULL; string, number, TRUE, FALSE.
 * Identifiers: a JMS header name (JMSType, JMSPriority ...; not JMSDeliveryMode), a section field (header.priority,
 * h.priority, properties.subject, p.subject, application_properties.k, a.k) or any other
 * name, which is an application property.
 */
import { err, ok, type Result } from "./result.js";

/** The bound: a selector past any of these is refused at attach (the error names which). */
export const SELECTOR_LIMITS = {
  /** Characters of selector text. */
  chars: 4096,
  /** Nodes of the AST (an IN list's values count one each). */
  nodes: 256,
  /** Nesting of parentheses, NOT and operators. */
  depth: 32,
  /** Characters of one LIKE pattern. */
  likeChars: 256,
  /** LIKE operators in one selector. */
  likes: 16,
} as const;

export type Field =
  | { readonly section: "header"; readonly name: "priority" | "durable" }
  | { readonly section: "properties"; readonly name: PropertyName }
  | { readonly section: "application"; readonly name: string };

/** The properties section's fields (part 3, 3.2.4), as the filtex spec names them. */
export const PROPERTY_NAMES = [
  "message-id",
  "user-id",
  "to",
  "subject",
  "reply-to",
  "correlation-id",
  "content-type",
  "content-encoding",
  "absolute-expiry-time",
  "creation-time",
  "group-id",
  "group-sequence",
  "reply-to-group-id",
] as const;
export type PropertyName = (typeof PROPERTY_NAMES)[number];

export type Literal = string | number | boolean;
export type CompareOp = "=" | "<>" | "<" | ">" | "<=" | ">=";
export type ArithOp = "+" | "-" | "*" | "/";

export type SelectorNode =
  | { readonly k: "lit"; readonly v: Literal }
  | { readonly k: "id"; readonly field: Field }
  | { readonly k: "not"; readonly e: SelectorNode }
  | { readonly k: "and" | "or"; readonly l: SelectorNode; readonly r: SelectorNode }
  | { readonly k: "cmp"; readonly op: CompareOp; readonly l: SelectorNode; readonly r: SelectorNode }
  | { readonly k: "arith"; readonly op: ArithOp; readonly l: SelectorNode; readonly r: SelectorNode }
  | { readonly k: "neg"; readonly e: SelectorNode }
  | {
      readonly k: "between";
      readonly not: boolean;
      readonly e: SelectorNode;
      readonly lo: SelectorNode;
      readonly hi: SelectorNode;
    }
  | { readonly k: "in"; readonly not: boolean; readonly e: SelectorNode; readonly list: readonly Literal[] }
  | {
      readonly k: "like";
      readonly not: boolean;
      readonly e: SelectorNode;
      readonly pattern: string;
      readonly escape?: string;
    }
  | { readonly k: "null"; readonly not: boolean; readonly e: SelectorNode };

/** JMS header names (JMS 2.0, 3.8.1.1) as the AMQP JMS mapping carries them. */
const JMS_FIELDS: Readonly<Record<string, Field>> = {
  JMSMessageID: { section: "properties", name: "message-id" },
  JMSCorrelationID: { section: "properties", name: "correlation-id" },
  JMSType: { section: "properties", name: "subject" },
  JMSTimestamp: { section: "properties", name: "creation-time" },
  JMSPriority: { section: "header", name: "priority" },
};

const SECTIONS: Readonly<Record<string, Field["section"]>> = {
  header: "header",
  h: "header",
  properties: "properties",
  p: "properties",
  application_properties: "application",
  a: "application",
};

const KEYWORDS = new Set(["AND", "OR", "NOT", "BETWEEN", "IN", "LIKE", "ESCAPE", "IS", "NULL", "TRUE", "FALSE"]);

type Token =
  | { readonly t: "kw"; readonly v: string; readonly at: number }
  | { readonly t: "id"; readonly field: Field; readonly at: number }
  | { readonly t: "str"; readonly v: string; readonly at: number }
  | { readonly t: "num"; readonly v: number; readonly at: number }
  | { readonly t: "op"; readonly v: string; readonly at: number }
  | { readonly t: "end"; readonly at: number };

class SelectorError extends Error {}
const fail = (message: string): never => {
  throw new SelectorError(message);
};

const isIdStart = (c: string) => /[A-Za-z_$]/.test(c);
const isIdPart = (c: string) => /[A-Za-z0-9_$]/.test(c);

function fieldOf(name: string, at: number): Field {
  const jms = JMS_FIELDS[name];
  if (jms) return jms;
  const dot = name.indexOf(".");
  if (dot < 0) return { section: "application", name };
  const section = SECTIONS[name.slice(0, dot)];
  const rest = name.slice(dot + 1);
  if (!section) return fail(`unknown section in identifier ${name} at ${at}`);
  if (section === "application") return { section, name: rest };
  if (section === "header") {
    if (rest === "priority" || rest === "durable") return { section, name: rest };
    return fail(`header field ${rest} (at ${at}) cannot be selected on: only priority and durable`);
  }
  if ((PROPERTY_NAMES as readonly string[]).includes(rest)) return { section, name: rest as PropertyName };
  return fail(`${name} at ${at} is not a field of the properties section`);
}

function lex(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i;
    if (c === "'") {
      let v = "";
      i++;
      for (;;) {
        if (i >= text.length) fail(`unterminated string starting at ${at}`);
        if (text[i] === "'") {
          if (text[i + 1] === "'") {
            v += "'";
            i += 2;
            continue;
          }
          i++;
          break;
        }
        v += text[i++];
      }
      out.push({ t: "str", v, at });
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(text[i + 1] ?? ""))) {
      const m = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[lLfFdD]?/.exec(text.slice(i, i + 64))!;
      const v = Number(m[0].replace(/[lLfFdD]$/, ""));
      if (!Number.isFinite(v)) fail(`number ${m[0]} at ${at} is out of range`);
      out.push({ t: "num", v, at });
      i += m[0].length;
    } else if (isIdStart(c)) {
      while (i < text.length && isIdPart(text[i]!)) i++;
      let word = text.slice(at, i);
      // A section field: header.priority, p.message-id, a.my-key (field names may hold '-').
      if (text[i] === "." && SECTIONS[word] !== undefined) {
        i++;
        const start = i;
        while (i < text.length && /[A-Za-z0-9_$-]/.test(text[i]!)) i++;
        if (i === start) fail(`a field name must follow ${word}. at ${at}`);
        word = text.slice(at, i);
      }
      const upper = word.toUpperCase();
      out.push(KEYWORDS.has(upper) ? { t: "kw", v: upper, at } : { t: "id", field: fieldOf(word, at), at });
    } else {
      const two = text.slice(i, i + 2);
      const op = ["<>", "<=", ">=", "!="].includes(two) ? two : "=<>+-*/(),".includes(c) ? c : undefined;
      if (op === undefined) fail(`unexpected character ${JSON.stringify(c)} at ${at}`);
      out.push({ t: "op", v: op === "!=" ? "<>" : op!, at });
      i += op!.length;
    }
  }
  out.push({ t: "end", at: text.length });
  return out;
}

/** Recursive descent over the tokens; every node and every level counts against the bound. */
class Parser {
  private i = 0;
  private nodes = 0;
  private likes = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): SelectorNode {
    const e = this.or(0);
    const t = this.peek();
    if (t.t !== "end") fail(`unexpected ${describe(t)} at ${t.at}`);
    return e;
  }

  private peek(): Token {
    return this.tokens[this.i]!;
  }
  private next(): Token {
    return this.tokens[this.i++]!;
  }
  private isKw(v: string): boolean {
    const t = this.peek();
    return t.t === "kw" && t.v === v;
  }
  private isOp(v: string): boolean {
    const t = this.peek();
    return t.t === "op" && t.v === v;
  }
  private expectKw(v: string): void {
    if (!this.isKw(v)) fail(`expected ${v} at ${this.peek().at}, found ${describe(this.peek())}`);
    this.i++;
  }
  private node<N extends SelectorNode>(n: N, count = 1): N {
    this.nodes += count;
    if (this.nodes > SELECTOR_LIMITS.nodes)
      fail(`the selector has more than ${SELECTOR_LIMITS.nodes} terms, the gateway's bound`);
    return n;
  }
  private deeper(depth: number): number {
    if (depth + 1 > SELECTOR_LIMITS.depth)
      fail(`the selector nests deeper than ${SELECTOR_LIMITS.depth} levels, the gateway's bound`);
    return depth + 1;
  }

  private or(d: number): SelectorNode {
    let l = this.and(d);
    while (this.isKw("OR")) {
      this.i++;
      l = this.node({ k: "or", l, r: this.and(d) });
    }
    return l;
  }

  private and(d: number): SelectorNode {
    let l = this.not(d);
    while (this.isKw("AND")) {
      this.i++;
      l = this.node({ k: "and", l, r: this.not(d) });
    }
    return l;
  }

  private not(d: number): SelectorNode {
    if (this.isKw("NOT")) {
      this.i++;
      return this.node({ k: "not", e: this.not(this.deeper(d)) });
    }
    return this.predicate(d);
  }

  private predicate(d: number): SelectorNode {
    const e = this.additive(d);
    const t = this.peek();
    if (t.t === "op" && ["=", "<>", "<", ">", "<=", ">="].includes(t.v)) {
      this.i++;
      return this.node({ k: "cmp", op: t.v as CompareOp, l: e, r: this.additive(d) });
    }
    if (this.isKw("IS")) {
      this.i++;
      const not = this.isKw("NOT");
      if (not) this.i++;
      this.expectKw("NULL");
      return this.node({ k: "null", not, e });
    }
    const not = this.isKw("NOT");
    if (not) this.i++;
    if (this.isKw("BETWEEN")) {
      this.i++;
      const lo = this.additive(d);
      this.expectKw("AND");
      return this.node({ k: "between", not, e, lo, hi: this.additive(d) });
    }
    if (this.isKw("IN")) {
      this.i++;
      if (!this.isOp("(")) fail(`expected ( after IN at ${this.peek().at}`);
      this.i++;
      const list: Literal[] = [];
      do {
        if (list.length > 0) this.i++;
        const v = this.next();
        if (v.t !== "str" && v.t !== "num") fail(`IN takes string or number literals, found ${describe(v)} at ${v.at}`);
        list.push((v as { v: Literal }).v);
      } while (this.isOp(","));
      if (!this.isOp(")")) fail(`expected ) closing IN at ${this.peek().at}`);
      this.i++;
      return this.node({ k: "in", not, e, list }, 1 + list.length);
    }
    if (this.isKw("LIKE")) {
      this.i++;
      const p = this.next();
      if (p.t !== "str") fail(`LIKE takes a string pattern, found ${describe(p)} at ${p.at}`);
      const pattern = (p as { v: string }).v;
      if (pattern.length > SELECTOR_LIMITS.likeChars)
        fail(`the LIKE pattern at ${p.at} is longer than ${SELECTOR_LIMITS.likeChars} characters, the gateway's bound`);
      if (++this.likes > SELECTOR_LIMITS.likes)
        fail(`the selector has more than ${SELECTOR_LIMITS.likes} LIKE operators, the gateway's bound`);
      let escapeChar: string | undefined;
      if (this.isKw("ESCAPE")) {
        this.i++;
        const x = this.next();
        if (x.t !== "str" || [...(x as { v: string }).v].length !== 1)
          fail(`ESCAPE takes a string of one character at ${x.at}`);
        escapeChar = (x as { v: string }).v;
      }
      return this.node({ k: "like", not, e, pattern, ...(escapeChar !== undefined ? { escape: escapeChar } : {}) });
    }
    if (not) fail(`expected BETWEEN, IN or LIKE after NOT at ${this.peek().at}`);
    return e;
  }

  private additive(d: number): SelectorNode {
    let l = this.multiplicative(d);
    while (this.isOp("+") || this.isOp("-")) {
      const op = this.next() as { v: ArithOp };
      l = this.node({ k: "arith", op: op.v, l, r: this.multiplicative(d) });
    }
    return l;
  }

  private multiplicative(d: number): SelectorNode {
    let l = this.unary(d);
    while (this.isOp("*") || this.isOp("/")) {
      const op = this.next() as { v: ArithOp };
      l = this.node({ k: "arith", op: op.v, l, r: this.unary(d) });
    }
    return l;
  }

  private unary(d: number): SelectorNode {
    if (this.isOp("-")) {
      this.i++;
      return this.node({ k: "neg", e: this.unary(this.deeper(d)) });
    }
    if (this.isOp("+")) {
      this.i++;
      return this.unary(this.deeper(d));
    }
    return this.primary(d);
  }

  private primary(d: number): SelectorNode {
    const t = this.next();
    switch (t.t) {
      case "str":
      case "num":
        return this.node({ k: "lit", v: t.v });
      case "id":
        return this.node({ k: "id", field: t.field });
      case "kw":
        if (t.v === "TRUE" || t.v === "FALSE") return this.node({ k: "lit", v: t.v === "TRUE" });
        break;
      case "op":
        if (t.v === "(") {
          const e = this.or(this.deeper(d));
          if (!this.isOp(")")) fail(`expected ) at ${this.peek().at}, found ${describe(this.peek())}`);
          this.i++;
          return e;
        }
        break;
    }
    return fail(`unexpected ${describe(t)} at ${t.at}`);
  }
}

function describe(t: Token): string {
  switch (t.t) {
    case "end":
      return "end of selector";
    case "id":
      return `identifier ${t.field.name}`;
    case "str":
      return `string '${t.v.slice(0, 32)}'`;
    default:
      return String(t.v);
  }
}

/** The selector's AST, or why it is refused (syntax, or which part of the bound it passes). */
export function parseSelector(text: string): Result<SelectorNode, string> {
  if (text.length > SELECTOR_LIMITS.chars)
    return err(`the selector is ${text.length} characters long; the gateway's bound is ${SELECTOR_LIMITS.chars}`);
  try {
    return ok(new Parser(lex(text)).parse());
  } catch (e) {
    if (e instanceof SelectorError) return err(e.message);
    throw e;
  }
}
