// Reads a config file (YAML or JSON), lays the command-line flags over it, validates it and
// checks that every secret and file it names can be read. Problems are collected, never
// thrown: `check` and `run` print them all, one `path: message` line each.
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { extname, resolve } from "node:path";
import { parseDocument } from "yaml";
import type * as z from "zod";
import { withEmbeddedDefaults } from "./embeddedDefaults.js";
import { type ConfigFlags, configFileSchema, type GatewayConfig } from "./schema.js";
import { checkReadable, resolveSecret } from "./secrets.js";
import { describe } from "./units.js";

export type { ConfigFlags };
export type LoadResult =
  | { readonly ok: true; readonly config: GatewayConfig }
  | { readonly ok: false; readonly problems: string[] };

export interface LoadOptions {
  /** The config file; absent = all defaults (and the flags). */
  readonly file?: string | undefined;
  readonly flags?: ConfigFlags;
  /** Where env: secrets are looked up; process.env unless a test gives its own. */
  readonly env?: NodeJS.ProcessEnv;
}

type Tree = Record<string, unknown>;

export async function loadConfig(options: LoadOptions): Promise<LoadResult> {
  const flags = options.flags ?? {};
  const env = options.env ?? process.env;
  const read = options.file === undefined ? { ok: true as const, tree: {} } : await readTree(options.file);
  if (!read.ok) return { ok: false, problems: read.problems };

  const overridden = applyFlags(read.tree, flags);
  const problems: string[] = [];
  const parsed = configFileSchema.safeParse(withEmbeddedDefaults(overridden.tree), { reportInput: true });
  if (!parsed.success) problems.push(...parsed.error.issues.flatMap(describeIssue));
  problems.push(...(await referenceProblems(overridden.tree, env)));
  if (flags.data === "") problems.push(`data (from --data): must not be empty`);

  const annotated = [...new Set(problems)].map((line) => annotate(line, overridden.fromFlag));
  if (!parsed.success || annotated.length > 0) return { ok: false, problems: annotated };

  const { id, ...rest } = parsed.data;
  return {
    ok: true,
    config: {
      ...rest,
      id: id ?? randomBytes(8).toString("hex"),
      data: resolve(flags.data ?? "./data"),
      source: { file: options.file ?? null, flags, id_generated: id === undefined },
    },
  };
}

// --- reading ---------------------------------------------------------------------------------

async function readTree(file: string): Promise<{ ok: true; tree: Tree } | { ok: false; problems: string[] }> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : (error as Error).message;
    return { ok: false, problems: [`${file}: cannot read the config file (${why})`] };
  }
  const ext = extname(file).toLowerCase();
  const json = ext === ".json" || (ext !== ".yaml" && ext !== ".yml" && text.trimStart().startsWith("{"));
  const value = json ? parseJson(file, text) : parseYaml(file, text);
  if (!value.ok) return value;
  if (value.tree === null || value.tree === undefined) return { ok: true, tree: {} };
  if (typeof value.tree !== "object" || Array.isArray(value.tree)) {
    return { ok: false, problems: [`${file}: expected a mapping of settings at the top, got ${describe(value.tree)}`] };
  }
  return { ok: true, tree: value.tree as Tree };
}

function parseJson(file: string, text: string): { ok: true; tree: unknown } | { ok: false; problems: string[] } {
  if (text.trim() === "") return { ok: true, tree: null };
  try {
    return { ok: true, tree: JSON.parse(text) };
  } catch (error) {
    return { ok: false, problems: [`${file}: not valid JSON: ${(error as Error).message}`] };
  }
}

function parseYaml(file: string, text: string): { ok: true; tree: unknown } | { ok: false; problems: string[] } {
  // YAML 1.2 core schema: "on"/"yes" stay strings; a key written twice is an error, not "last one wins".
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    return { ok: false, problems: doc.errors.map((e) => `${file}: not valid YAML: ${firstLine(e.message)}`) };
  }
  return { ok: true, tree: doc.toJS({ maxAliasCount: 100 }) };
}

const firstLine = (message: string) => (message.split("\n")[0] ?? message).replace(/:$/, "");

// --- flags -----------------------------------------------------------------------------------

const FLAG_PATHS: readonly [keyof ConfigFlags, string, readonly string[]][] = [
  ["id", "--id", ["id"]],
  ["nats", "--nats", ["nats", "servers"]],
  ["natsListen", "--nats-listen", ["nats", "embedded_listen"]],
  ["mqtt", "--mqtt", ["mqtt", "listen"]],
  ["amqp", "--amqp", ["amqp", "listen"]],
  ["http", "--http", ["http", "listen"]],
  ["logLevel", "--log-level", ["log", "level"]],
  ["logFormat", "--log-format", ["log", "format"]],
];

/** The file's tree with the flags written in, and which dotted paths the flags set. */
function applyFlags(tree: Tree, flags: ConfigFlags): { tree: Tree; fromFlag: Map<string, string> } {
  const out = structuredClone(tree);
  const fromFlag = new Map<string, string>();
  for (const [key, flag, path] of FLAG_PATHS) {
    const value = flags[key];
    if (value === undefined) continue;
    const set =
      key === "nats"
        ? value
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "")
        : value;
    if (setPath(out, path, set)) fromFlag.set(path.join("."), flag);
  }
  return { tree: out, fromFlag };
}

/** Sets tree[path] = value, making sections as needed; false when the file has a non-mapping in the way (the schema reports that). */
function setPath(tree: Tree, path: readonly string[], value: unknown): boolean {
  let node: Tree = tree;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === undefined || next === null) node[key] = {};
    else if (typeof next !== "object" || Array.isArray(next)) return false;
    node = node[key] as Tree;
  }
  node[path[path.length - 1] as string] = value;
  return true;
}

function annotate(line: string, fromFlag: Map<string, string>): string {
  for (const [path, flag] of fromFlag) {
    if (line.startsWith(`${path}: `) || line.startsWith(`${path}[`)) {
      const at = line.indexOf(": ");
      return `${line.slice(0, at)} (from ${flag})${line.slice(at)}`;
    }
  }
  return line;
}

// --- issues ----------------------------------------------------------------------------------

/** A dotted path with indexes: mqtt.routes[1].template. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else if (/^[^\s.[\]"]+$/.test(String(key))) out += out === "" ? String(key) : `.${String(key)}`;
    else out += `[${JSON.stringify(String(key))}]`;
  }
  return out === "" ? "(top level)" : out;
}

const TYPE_NAMES: Record<string, string> = {
  object: "a mapping",
  array: "a list",
  string: "a string",
  number: "a number",
  boolean: "true or false",
  int: "a whole number",
};

function describeIssue(issue: z.core.$ZodIssue): string[] {
  const at = formatPath(issue.path);
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => `${formatPath([...issue.path, key])}: unknown key${suggest(key)}`);
    case "invalid_type":
      if (issue.input === undefined) return [`${at}: is required`];
      return [`${at}: expected ${TYPE_NAMES[issue.expected] ?? issue.expected}, got ${describe(issue.input)}`];
    case "invalid_value":
      return [`${at}: expected one of ${issue.values.map(String).join(", ")}, got ${describe(issue.input)}`];
    case "invalid_key":
      return issue.issues.map((inner) => `${at}: the name ${JSON.stringify(issue.input)} ${inner.message}`);
    case "invalid_element":
      return issue.issues.map((inner) => `${at}: ${inner.message}`);
    case "too_small":
    case "too_big":
      return [
        `${at}: ${issue.message.startsWith("Too") ? `must be ${issue.code === "too_small" ? "at least" : "at most"} ${String(issue.code === "too_small" ? issue.minimum : issue.maximum)}` : issue.message}`,
      ];
    default:
      return [`${at}: ${issue.message}`];
  }
}

const KNOWN_KEYS = collectKeys(configFileSchema);

/** Every key name the schema knows, for "did you mean" on a misspelt key. */
function collectKeys(schema: unknown, seen = new Set<unknown>(), keys = new Set<string>()): Set<string> {
  if (schema === null || typeof schema !== "object" || seen.has(schema)) return keys;
  seen.add(schema);
  const def = (schema as { _zod?: { def?: Record<string, unknown> } })._zod?.def;
  if (!def) return keys;
  if (def.type === "object" && def.shape && typeof def.shape === "object") {
    for (const [key, inner] of Object.entries(def.shape)) {
      keys.add(key);
      collectKeys(inner, seen, keys);
    }
  }
  for (const field of ["innerType", "in", "out", "element", "valueType", "schema"]) collectKeys(def[field], seen, keys);
  return keys;
}

function suggest(key: string): string {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 4)) + 1;
  for (const known of KNOWN_KEYS) {
    const d = distance(key.toLowerCase(), known);
    if (d < bestDistance) [best, bestDistance] = [known, d];
  }
  return best === undefined ? "" : ` (did you mean ${best}?)`;
}

function distance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(
        (previous[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = row;
  }
  return previous[b.length] ?? 0;
}

// --- secrets and files -----------------------------------------------------------------------

const SECRET_KEYS = ["password", "token"];
const CREDENTIAL_FILES = ["creds_file", "nkey_seed_file"];
const TLS_FILES = ["ca_file", "cert_file", "key_file"];

/** Every secret and file the config names must be readable now: a typo fails `check`, not the first connection. */
async function referenceProblems(tree: Tree, env: NodeJS.ProcessEnv): Promise<string[]> {
  const checks: { path: (string | number)[]; run: () => Promise<{ ok: boolean; error?: string }> }[] = [];
  const credentials = (path: string[], node: unknown) => {
    for (const key of SECRET_KEYS) {
      const value = field(node, key);
      if (value !== undefined) checks.push({ path: [...path, key], run: () => resolveSecret(value, env) });
    }
    for (const key of CREDENTIAL_FILES) {
      const value = field(node, key);
      if (value !== undefined) checks.push({ path: [...path, key], run: () => checkReadable(value) });
    }
  };
  const tlsFiles = (path: string[], node: unknown) => {
    for (const key of TLS_FILES) {
      const value = field(node, key);
      if (value !== undefined) checks.push({ path: [...path, key], run: () => checkReadable(value) });
    }
  };
  credentials(["admin"], tree.admin);
  const users = tree.gateway_users;
  if (users !== null && typeof users === "object" && !Array.isArray(users)) {
    for (const [account, node] of Object.entries(users)) credentials(["gateway_users", account], node);
  }
  tlsFiles(["nats", "tls"], field(tree.nats, "tls", "object"));
  tlsFiles(["mqtt", "tls"], field(tree.mqtt, "tls", "object"));
  tlsFiles(["amqp", "tls"], field(tree.amqp, "tls", "object"));

  const results = await Promise.all(checks.map(async (c) => ({ path: c.path, result: await c.run() })));
  return results.filter((r) => !r.result.ok).map((r) => `${formatPath(r.path)}: ${r.result.error ?? "cannot be read"}`);
}

function field(node: unknown, key: string): string | undefined;
function field(node: unknown, key: string, kind: "object"): unknown;
function field(node: unknown, key: string, kind: "string" | "object" = "string"): unknown {
  if (node === null || typeof node !== "object" || Array.isArray(node)) return undefined;
  const value = (node as Tree)[key];
  if (kind === "object") return value;
  return typeof value === "string" && value !== "" ? value : undefined;
}
