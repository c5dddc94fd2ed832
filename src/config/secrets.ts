// Secret references: the config keeps "file:/path" and "env:NAME" as written, so a logged
// or re-read config never holds the secret, and a rotated file is read again on reconnect.
import { access, constants, readFile } from "node:fs/promises";
import { err, ok, type Result } from "../protocol/result.js";

export type SecretReference =
  | { readonly kind: "file"; readonly path: string }
  | { readonly kind: "env"; readonly name: string }
  | { readonly kind: "literal" };

/** What a secret string refers to; anything without a "file:" or "env:" prefix is the secret itself. */
export function secretReference(value: string): SecretReference {
  if (value.startsWith("file:")) return { kind: "file", path: value.slice("file:".length) };
  if (value.startsWith("env:")) return { kind: "env", name: value.slice("env:".length) };
  return { kind: "literal" };
}

/** The secret a reference names: a file's content (trimmed, as secret files usually end in a newline) or an environment variable. */
export async function resolveSecret(value: string, env: NodeJS.ProcessEnv = process.env): Promise<Result<string>> {
  const ref = secretReference(value);
  switch (ref.kind) {
    case "literal":
      return ok(value);
    case "env": {
      if (ref.name === "") return err(`"env:" names no environment variable`);
      const found = env[ref.name];
      if (found === undefined) return err(`environment variable ${ref.name} is not set`);
      if (found.trim() === "") return err(`environment variable ${ref.name} is empty`);
      return ok(found.trim());
    }
    case "file": {
      if (ref.path === "") return err(`"file:" names no file`);
      try {
        const content = (await readFile(ref.path, "utf8")).trim();
        return content === "" ? err(`secret file ${ref.path} is empty`) : ok(content);
      } catch (error) {
        return err(`secret file ${ref.path} cannot be read (${reason(error)})`);
      }
    }
  }
}

/** A file the gateway will open later (certificates, creds): refused now rather than at the first connection. */
export async function checkReadable(path: string): Promise<Result<string>> {
  try {
    await access(path, constants.R_OK);
    return ok(path);
  } catch (error) {
    return err(`file ${path} cannot be read (${reason(error)})`);
  }
}

function reason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === "ENOENT") return "no such file";
  if (code === "EACCES") return "permission denied";
  if (code === "EISDIR") return "it is a directory";
  return error instanceof Error ? error.message : String(error);
}
