/**
 * The package as users get it: `npm pack` (its `prepare` builds the JS and type declarations)
 * gives a tarball that installs into an empty project, with ioredis installed there as the peer
 * dependency (npm's newest in the declared range); the README's first example type-checks
 * against the installed declarations and runs against a real server.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { promisify } from "node:util";

import { Server } from "./server";

const sh = promisify(execFile);
const CLIENT = resolve(__dirname, "../..");
const TSC = join(CLIENT, "node_modules/typescript/bin/tsc");

function firstExample(): string {
  const m = /```ts\n([\s\S]*?)```/.exec(readFileSync(join(CLIENT, "README.md"), "utf8"));
  assert.ok(m, "README.md has no ts example");
  return m[1]!;
}

describe("the npm package", () => {
  const dir = mkdtempSync(join(tmpdir(), "orca-node-pkg-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("packs, installs into an empty project and runs the README's first example", async () => {
    const { stdout } = await sh("npm", ["pack", "--json", "--pack-destination", dir], {
      cwd: CLIENT,
      timeout: 120_000,
    });
    const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as {
      filename: string;
      files: { path: string }[];
    }[];
    const files = packed!.files.map((f) => f.path);
    for (const f of [
      "build/src/index.js",
      "build/src/index.d.ts",
      "build/src/worker.js",
      "package.json",
      "README.md",
    ])
      assert.ok(files.includes(f), `${f} not in the tarball`);
    assert.ok(
      !files.some((f) => f.startsWith("build/test/") || f.startsWith("src/")),
      "tests or sources packed",
    );

    const project = join(dir, "app");
    await sh("mkdir", ["-p", project]);
    writeFileSync(
      join(project, "package.json"),
      JSON.stringify({ name: "app", private: true, type: "module" }),
    );
    await sh("npm", ["install", "--no-audit", "--no-fund", join(dir, packed!.filename)], {
      cwd: project,
      timeout: 300_000,
    });
    const ioredis = JSON.parse(readFileSync(join(project, "node_modules/ioredis/package.json"), "utf8")) as {
      version: string;
    };
    console.log(`installed with its peer ioredis ${ioredis.version}`);

    const server = await Server.start();
    try {
      const code = firstExample().replace("new Redis()", `new Redis({ port: ${server.port} })`);
      assert.ok(code.includes(`port: ${server.port}`));
      writeFileSync(join(project, "example.mts"), code);
      // Type-checked against the installed declarations (strict), then run as plain JS.
      await sh(
        process.execPath,
        [
          TSC,
          "--noEmit",
          "--strict",
          "--module",
          "nodenext",
          "--moduleResolution",
          "nodenext",
          "--target",
          "es2022",
          "--lib",
          "es2022,dom",
          "--skipLibCheck",
          "example.mts",
        ],
        { cwd: project, timeout: 120_000 },
      );
      writeFileSync(join(project, "example.mjs"), code);
      const run = await sh(process.execPath, ["example.mjs"], { cwd: project, timeout: 60_000 });
      assert.match(run.stdout, /^true /);
    } finally {
      server.stop();
    }
  });
});
