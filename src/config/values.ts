// The value kinds of the config file (durations, sizes, addresses, names, subjects,
// route templates) as zod schemas, each refusing with a message that says what is wrong.
import * as z from "zod";
import type { Result } from "../protocol/result.js";
import { parseTemplate } from "../protocol/route.js";
import { parseDuration, parseListen, parseSize } from "./units.js";

export function fromParser<T>(parse: (input: unknown) => Result<T>) {
  return z.unknown().transform((input, ctx): T => {
    const parsed = parse(input);
    if (parsed.ok) return parsed.value;
    ctx.addIssue({ code: "custom", message: parsed.error, input });
    return z.NEVER;
  });
}

export const always = { when: () => true };
export const duration = fromParser(parseDuration);
export const size = fromParser(parseSize);
export const listen = fromParser(parseListen);
export const nonEmpty = z.string().min(1, "must not be empty");
export const path = nonEmpty;

export function between(min: number, max: number, show: (n: number) => string = String) {
  return z.number().refine((n) => n >= min && n <= max, { message: `must be between ${show(min)} and ${show(max)}` });
}
export const count = (max = Number.MAX_SAFE_INTEGER) =>
  z.number().int("must be a whole number").min(0, "must be 0 or more").max(max);
export const seconds = (ms: number) => `${ms / 1000}s`;

// One subject token, as the id and account names are in $MQG.admin.server.<id> and $MQG.admin.account.<account>.
export const token = nonEmpty.regex(/^[^\s.*>]+$/, "must be one subject token: no '.', '*', '>' or whitespace");
// JetStream refuses these in stream names; KV bucket names are narrower still.
export const streamName = nonEmpty.regex(
  /^[^\s.*>/\\]+$/,
  "is not a stream name: no whitespace, '.', '*', '>', '/' or '\\'",
);
export const bucketName = nonEmpty.regex(
  /^[A-Za-z0-9_-]+$/,
  "is not a KV bucket name: letters, digits, '_' and '-' only",
);
export const literalSubject = nonEmpty.refine(
  isLiteralSubject,
  "is not a subject without wildcards (tokens separated by '.', none empty, no '*', '>' or whitespace)",
);

function isLiteralSubject(subject: string): boolean {
  return subject.split(".").every((t) => t !== "" && !/[\s*>]/.test(t) && t !== "*" && t !== ">");
}

/** Why a route template is wrong, or null: the protocol's own parser decides, so the config refuses exactly what routing cannot use. */
export function templateProblem(template: string): string | null {
  const parsed = parseTemplate(template);
  // Its messages quote the template, which the problem's path already points at.
  return parsed.ok ? null : parsed.error.replace(`template ${JSON.stringify(template)}`, "template");
}

export const template = nonEmpty.superRefine((value, ctx) => {
  const problem = templateProblem(value);
  if (problem) ctx.addIssue({ code: "custom", message: problem, input: value });
});
