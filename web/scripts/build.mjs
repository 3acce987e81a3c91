// Builds the dashboard into dist/: the TypeScript in src/ compiled by tsc
// into dist/js/ (ES modules, no bundler), static/ copied beside it. The
// output is deterministic, so a rebuild of unchanged sources leaves the
// committed dist/ unchanged.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
const r = spawnSync(process.execPath, [tsc, '-p', root], { stdio: 'inherit', cwd: root });
if (r.status !== 0) {
  console.error('tsc failed');
  process.exit(r.status ?? 1);
}
cpSync(join(root, 'static'), dist, { recursive: true });
console.log('built ' + dist);
