/**
 * Lints the Dockerfile offline: dockerfile-utils' validator (syntax, instruction rules; hadolint's binary cannot be
 * installed here: it is on neither the npm registry nor Debian) plus this project's rules, hadolint-style:
 * pinned base images, a multi-stage build, a non-root final user, exec-form CMD, no ADD of URLs, the base image's
 * Node major equal to CI's and inside `engines`, and the build's npm equal to `packageManager`.
 * Usage: ts-node src/lint-dockerfile.ts <Dockerfile>; exits 1 on any problem.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { validate } from "dockerfile-utils";
import semver from "semver";
import { REPO_ROOT } from "./render";

export function lintDockerfile(file: string, nodeVersion = process.version): string[] {
  const text = readFileSync(file, "utf8");
  const problems = validate(text).map((d) => `line ${d.range.start.line + 1}: ${d.message}`);
  const lines = text.split("\n").map((l) => l.trim());
  const froms = lines.filter((l) => /^FROM\s/i.test(l));
  if (froms.length < 2) problems.push("not a multi-stage build (one FROM)");
  const stageNames = new Set(froms.map((f) => /\sAS\s+(\S+)/i.exec(f)?.[1]).filter(Boolean));
  for (const f of froms) {
    const image = f.split(/\s+/)[1];
    if (stageNames.has(image)) continue;
    if (!image.includes(":") || /:latest$/.test(image)) problems.push(`${f}: pin the base image's tag`);
    const node = /^node:(\d+)(?:\.(\d+))?/.exec(image);
    if (node) {
      const rootPkg = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8"));
      if (!semver.satisfies(`${node[1]}.${node[2] ?? 99}.99`, rootPkg.engines.node)) problems.push(`${image} is outside engines.node ${rootPkg.engines.node}`);
      if (Number(node[1]) !== semver.major(nodeVersion)) problems.push(`${image} is Node ${node[1]} but CI runs ${nodeVersion}`);
    }
  }
  const finalStage = lines.slice(lines.lastIndexOf(froms[froms.length - 1]));
  const users = finalStage.filter((l) => /^USER\s/i.test(l)).map((l) => l.split(/\s+/)[1]);
  if (users.length === 0 || /^(root|0)(:|$)/.test(users[users.length - 1])) problems.push("the final stage must end with a non-root USER");
  const cmd = finalStage.filter((l) => /^CMD\s/i.test(l));
  if (cmd.length !== 1 || !/^CMD\s+\[/.test(cmd[0])) problems.push("the final stage needs one exec-form CMD");
  if (lines.some((l) => /^ADD\s+https?:/i.test(l))) problems.push("ADD of a URL: download in a RUN with a checksum, or COPY");
  const npmPin = lines.map((l) => /npm install -g npm@(\S+)/.exec(l)?.[1]).find(Boolean);
  const packageManager = JSON.parse(readFileSync(path.join(REPO_ROOT, "package.json"), "utf8")).packageManager as string;
  if (npmPin !== packageManager.replace(/^npm@/, "")) problems.push(`the build's npm (${npmPin ?? "unpinned"}) is not packageManager ${packageManager}`);
  return problems;
}

if (require.main === module) {
  const file = path.resolve(process.argv[2] ?? path.join(REPO_ROOT, "Dockerfile"));
  const problems = lintDockerfile(file);
  for (const p of problems) process.stderr.write(`${path.relative(REPO_ROOT, file)}: ${p}\n`);
  process.stdout.write(`dockerfile lint: ${problems.length === 0 ? "clean" : `${problems.length} problem(s)`}\n`);
  process.exit(problems.length === 0 ? 0 : 1);
}
