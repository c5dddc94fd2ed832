/**
 * A receiver's filter set (part 3, 3.5.8: a message passes only if it passes every
 * filter) -> one predicate over a FilterView, or why the attach is refused
 * (docs/decisions/amqp-filters.md). Understood, as RabbitMQ 4.1-4.3 names them:
 *
 * - amqp:properties-filter (0x173) and amqp:application-properties-filter (0x174),
 *   filtex 4.2.4/4.2.5: every listed field equals the reference, a null reference
 *   matches anything, "&p:x" is a prefix, "&s:x" a suffix, "&&x" the text "&x";
 * - apache.org:selector-filter:string (0x0000468C00000004), a JMS selector, and
 *   amqp:sql-filter (0x120), the filtex SQL filter, both through amqpSelector.ts.
 *
 * A filter of another type is left out of the answer (3.5.3: the client sees it is not
 * in force). Pure.
 */

import { type FilterValue, type FilterView, filterValueOf, mapEntries } from "./amqpFilterView.js";
import { PROPERTY_NAMES, type PropertyName, parseSelector } from "./amqpSelector.js";
import { compileSelector } from "./amqpSelectorEval.js";
import { printSelector } from "./amqpSelectorPrint.js";
import { isTyped } from "./amqpValue.js";
import { err, ok, type Result } from "./result.js";

export const FILTER_LIMITS = {
  /** Filters in one filter set. */
  filters: 8,
  /** Fields in one properties or application-properties filter (RabbitMQ's bound too). */
  fields: 16,
} as const;

export const FilterDescriptor = {
  properties: { code: 0x173, name: "amqp:properties-filter" },
  applicationProperties: { code: 0x174, name: "amqp:application-properties-filter" },
  sql: { code: 0x120, name: "amqp:sql-filter" },
  selector: { code: 0x0000468c00000004, name: "apache.org:selector-filter:string" },
} as const;
type Kind = keyof typeof FilterDescriptor;

export interface FilterRefusal {
  readonly condition: "amqp:invalid-field" | "amqp:not-implemented";
  readonly description: string;
}

export interface CompiledFilters {
  /** The names of the filters in force: the gateway's attach echoes these entries. */
  readonly accepted: readonly string[];
  readonly test: (view: FilterView) => boolean;
  /**
   * The filters as canonical text: equal for filter sets that select alike however they
   * were spelt (a durable subscription whose filters change is a new one, as in JMS).
   */
  readonly identity: string;
}

function kindOf(descriptor: unknown): Kind | undefined {
  const d = isTyped(descriptor) ? descriptor.value : descriptor;
  for (const [kind, x] of Object.entries(FilterDescriptor) as Array<[Kind, { code: number; name: string }]>)
    if (d === x.code || d === x.name) return kind;
  return undefined;
}

type Reference =
  | { readonly any: true }
  | { readonly prefix: string }
  | { readonly suffix: string }
  | { readonly equals: FilterValue };

function reference(v: unknown, where: string): Result<Reference, string> {
  if (isTyped(v) && v.type.typecode === 0x40) return ok({ any: true });
  if (v === null || v === undefined) return ok({ any: true });
  const x = filterValueOf(v);
  if (x === undefined) return err(`${where} has a value of a type a filter cannot compare`);
  if (typeof x !== "string" || !x.startsWith("&")) return ok({ equals: x });
  if (x.startsWith("&p:")) return ok({ prefix: x.slice(3) });
  if (x.startsWith("&s:")) return ok({ suffix: x.slice(3) });
  if (x.startsWith("&&")) return ok({ equals: x.slice(1) });
  return err(`${where} starts with & but is not &p:, &s: or &&`);
}

function matches(r: Reference, v: FilterValue | undefined): boolean {
  if ("any" in r) return true;
  if (v === undefined) return false;
  if ("prefix" in r) return typeof v === "string" && v.startsWith(r.prefix);
  if ("suffix" in r) return typeof v === "string" && v.endsWith(r.suffix);
  const e = r.equals;
  if (e instanceof Uint8Array || v instanceof Uint8Array)
    return e instanceof Uint8Array && v instanceof Uint8Array && e.length === v.length && e.every((b, i) => b === v[i]);
  return e === v;
}

type Test = (view: FilterView) => boolean;
/** A filter's predicate and its canonical text. */
type Compiled = { readonly test: Test; readonly text: string };

const referenceText = (r: Reference): string =>
  "any" in r
    ? "*"
    : "prefix" in r
      ? `prefix ${JSON.stringify(r.prefix)}`
      : "suffix" in r
        ? `suffix ${JSON.stringify(r.suffix)}`
        : r.equals instanceof Uint8Array
          ? `bytes ${Buffer.from(r.equals).toString("hex")}`
          : `${typeof r.equals} ${JSON.stringify(r.equals)}`;

function fieldsFilter(
  name: string,
  kind: "properties" | "applicationProperties",
  value: unknown,
): Result<Compiled, string> {
  const entries = mapEntries(value);
  if (entries.length === 0) return err(`filter ${name} is not a map of at least one field`);
  if (entries.length > FILTER_LIMITS.fields)
    return err(`filter ${name} has ${entries.length} fields; the gateway's bound is ${FILTER_LIMITS.fields}`);
  const checks: Array<[string, Reference]> = [];
  for (const [k, v] of entries) {
    const key = filterValueOf(k);
    if (typeof key !== "string") return err(`filter ${name} has a key that is not a symbol or string`);
    if (kind === "properties" && !(PROPERTY_NAMES as readonly string[]).includes(key))
      return err(`filter ${name}: ${key} is not a field of the properties section`);
    const r = reference(v, `filter ${name}, field ${key},`);
    if (!r.ok) return r;
    checks.push([key, r.value]);
  }
  const text = `${kind} ${checks
    .map(([k, r]) => `${JSON.stringify(k)}=${referenceText(r)}`)
    .sort()
    .join(" ")}`;
  return ok({
    test:
      kind === "properties"
        ? (m) => checks.every(([k, r]) => matches(r, m.properties.get(k as PropertyName)))
        : (m) => checks.every(([k, r]) => matches(r, m.application.get(k))),
    text,
  });
}

function selectorFilter(name: string, value: unknown): Result<Compiled, string> {
  // amqp:sql-filter may carry its expression as the first item of a list.
  const raw = isTyped(value) ? value.value : value;
  const text = Array.isArray(raw) ? filterValueOf(raw[0]) : filterValueOf(raw);
  if (typeof text !== "string") return err(`filter ${name} is not a string`);
  const parsed = parseSelector(text);
  if (!parsed.ok) return err(`filter ${name}: ${parsed.error}`);
  return ok({ test: compileSelector(parsed.value), text: `selector ${printSelector(parsed.value)}` });
}

/**
 * The filter set of a source terminus as rhea reads it (symbol keys, described values),
 * or undefined when it has none the gateway applies.
 */
export function compileFilterSet(
  filter: Readonly<Record<string, unknown>> | null | undefined,
): Result<CompiledFilters | undefined, FilterRefusal> {
  if (!filter || typeof filter !== "object") return ok(undefined);
  const entries = Object.entries(filter);
  if (entries.length > FILTER_LIMITS.filters)
    return err({
      condition: "amqp:invalid-field",
      description: `the source has ${entries.length} filters; the gateway's bound is ${FILTER_LIMITS.filters}`,
    });
  const accepted: string[] = [];
  const tests: Test[] = [];
  const texts: string[] = [];
  for (const [name, described] of entries) {
    const kind = isTyped(described) ? kindOf(described.descriptor) : undefined;
    if (kind === undefined) continue;
    const value = (described as { value: unknown }).value;
    const t =
      kind === "properties" || kind === "applicationProperties"
        ? fieldsFilter(name, kind, value)
        : selectorFilter(name, value);
    if (!t.ok) return err({ condition: "amqp:invalid-field", description: t.error });
    accepted.push(name);
    tests.push(t.value.test);
    texts.push(t.value.text);
  }
  if (tests.length === 0) return ok(undefined);
  return ok({
    accepted,
    test: tests.length === 1 ? tests[0]! : (m) => tests.every((t) => t(m)),
    // Names do not select: two sets with the same filters under other names are alike.
    identity: texts.sort().join("\n"),
  });
}
