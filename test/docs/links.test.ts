// The README and the docs link only to files of this repository that exist (a package or
// a clone has no ../shared/), and every page a reader is sent to is there.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const root = join(import.meta.dirname, "../..");

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? markdownFiles(join(dir, e.name)) : e.name.endsWith(".md") ? [join(dir, e.name)] : [],
  );
}

const pages = [join(root, "README.md"), join(root, "CHANGELOG.md"), ...markdownFiles(join(root, "docs"))];

describe("links in README.md and docs/", () => {
  for (const page of pages) {
    it(relative(root, page), () => {
      const text = readFileSync(page, "utf8");
      const broken: string[] = [];
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!) || target!.startsWith("#")) continue;
        const file = resolve(dirname(page), target!.split("#")[0]!);
        if (!file.startsWith(`${root}/`) || !existsSync(file)) broken.push(target!);
      }
      expect(broken).toEqual([]);
      expect(text).not.toMatch(/\.\.\/shared\//);
    });
  }
});
