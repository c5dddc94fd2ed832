import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium } from "playwright-core";

/** Debian's chromium (scripts/setup.sh installs it); playwright's own browser downloads are never used. */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? "/usr/bin/chromium";

/**
 * A headless Chromium with a fresh profile, quiet on the network (no updates, sync or
 * QUIC probes): the page under test is the only thing it talks to. close() also
 * removes the profile.
 */
export async function launchChromium(): Promise<BrowserContext & { dispose(): Promise<void> }> {
  const profile = mkdtempSync(join(tmpdir(), "mqgw-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1920, height: 1080 },
    timeout: 60_000,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return Object.assign(context, {
    async dispose() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  });
}
