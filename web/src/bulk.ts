// Bulk actions on jobs, as asynqmon and River UI have them: retry or cancel
// the selected jobs (POST /v1/admin/jobs/restart or /stop by jobIds), or
// every job matching a filter (the same routes by filter: a dry run shows
// the count first, then a confirmation acts). Each call's answer is shown
// per id: what was acted on, and each skipped id with its reason. A call by
// filter over more jobs than the API acts on inside a request answers 202
// with an operation, worked off in the background: its progress is shown
// until it has finished, then its counts and skip reasons.

import { describe } from './api.js';
import type { Ctx } from './ctx.js';
import { h, replace } from './dom.js';
import type { Operation } from './types.js';

// How often a running operation is read.
const OPERATION_POLL_MS = 1000;

// The two actions and the statuses each applies to (the API's filter.status).
export const BULK_ACTIONS = {
  restart: { label: 'Retry', done: 'restarted', past: 'Retried', statuses: ['failed', 'cancelled', 'stale'] },
  stop: { label: 'Cancel', done: 'stopped', past: 'Cancelled', statuses: ['scheduled', 'queued', 'running'] },
} as const;
export type BulkAction = keyof typeof BULK_ACTIONS;

// The filter of a call by filter (the inspector's fields the bulk routes take).
export interface BulkFilter {
  status: string;
  tier?: string;
  errorCode?: string;
  type?: string;
  owner?: string;
}

interface BulkResult {
  restarted?: string[];
  stopped?: string[];
  skipped: { id: string; reason: string }[];
  dryRun?: boolean;
  matched?: number;
  limit?: number;
  jobIds?: string[];
}

export interface BulkOptions {
  // The ids selected in the list now.
  selected(): string[];
  // The list's filter as the bulk routes take it; null with why when the
  // list's filter cannot be acted on as a whole (why is shown).
  filter(): { filter: BulkFilter | null; why: string };
  // Called after a call changed something (reload the list).
  changed(): void;
}

export interface BulkPanel {
  el: HTMLElement;
  // Re-reads the selection (call on every checkbox change).
  sync(): void;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

export function bulkPanel(ctx: Ctx, opts: BulkOptions): BulkPanel {
  const selection = h('p', { class: 'muted', 'data-testid': 'bulk-selection' }, 'No job selected.');
  const byId: Record<BulkAction, HTMLButtonElement> = {
    restart: h('button', { type: 'button', disabled: true }, 'Retry selected'),
    stop: h('button', { type: 'button', disabled: true }, 'Cancel selected'),
  };
  const byFilter: Record<BulkAction, HTMLButtonElement> = {
    restart: h('button', { type: 'button', class: 'secondary' }, 'Retry all matching…'),
    stop: h('button', { type: 'button', class: 'secondary' }, 'Cancel all matching…'),
  };
  const filterNote = h('p', { class: 'muted small', 'data-testid': 'bulk-filter-note' });
  const confirm = h('div', { class: 'confirm', 'data-testid': 'bulk-confirm', hidden: true });
  const result = h('div', { 'data-testid': 'bulk-result', role: 'status', 'aria-live': 'polite' });
  const el = h(
    'section',
    { class: 'bulk', 'aria-label': 'Bulk actions', 'data-testid': 'bulk' },
    h('h2', null, 'Bulk actions'),
    selection,
    h('div', { class: 'actions' }, byId.restart, byId.stop, byFilter.restart, byFilter.stop),
    filterNote,
    confirm,
    result,
  );
  let busy = false;

  function sync(): void {
    const ids = opts.selected();
    selection.textContent = ids.length ? `${plural(ids.length, 'job')} selected.` : 'No job selected.';
    for (const b of Object.values(byId)) b.disabled = busy || ids.length === 0;
    const { filter, why } = opts.filter();
    for (const [a, b] of Object.entries(byFilter) as [BulkAction, HTMLButtonElement][]) {
      b.disabled = busy || !filter || !(BULK_ACTIONS[a].statuses as readonly string[]).includes(filter.status);
    }
    filterNote.textContent = filter
      ? `By filter: ${BULK_ACTIONS.restart.label} takes status ${BULK_ACTIONS.restart.statuses.join(', ')}; ${BULK_ACTIONS.stop.label} takes ${BULK_ACTIONS.stop.statuses.join(', ')}.`
      : why;
  }

  function show(action: BulkAction, r: BulkResult, how: string): void {
    const a = BULK_ACTIONS[action];
    const done = r[a.done] ?? [];
    replace(
      result,
      h('p', { 'data-testid': 'bulk-summary' }, `${how}: ${a.past.toLowerCase()} ${plural(done.length, 'job')}, skipped ${plural(r.skipped.length, 'job')}.`),
      done.length ? h('ul', { class: 'ids' }, done.map((id) => h('li', { 'data-done': id }, h('a', { href: `#/inspector/${encodeURIComponent(id)}` }, h('code', null, id)), ` ${a.done}`))) : null,
      r.skipped.length
        ? h('ul', { class: 'ids' }, r.skipped.map((s) => h('li', { 'data-skipped': s.id }, h('code', null, s.id), ' skipped: ', h('span', { class: 'reason' }, s.reason))))
        : null,
      r.matched !== undefined && r.jobIds && r.matched > r.jobIds.length
        ? h('p', { class: 'muted' }, `${plural(r.matched - r.jobIds.length, 'more job')} matched beyond this call's limit of ${r.limit}: act again to go on.`)
        : null,
    );
  }

  async function call(action: BulkAction, body: unknown): Promise<BulkResult | null> {
    try {
      return await ctx.api.post<BulkResult>(`/v1/admin/jobs/${action}`, body);
    } catch (e) {
      replace(result, h('p', { class: 'error', role: 'alert' }, `${BULK_ACTIONS[action].label} failed: ${describe(e)}`));
      return null;
    }
  }

  // callByFilter acts on a filter: the answer inside the request (200), or
  // the operation the API started instead (202).
  async function callByFilter(action: BulkAction, body: unknown): Promise<{ result?: BulkResult; operation?: Operation } | null> {
    try {
      const { data, response } = await ctx.api.request<BulkResult | Operation>('POST', `/v1/admin/jobs/${action}`, body);
      return response.status === 202 ? { operation: data as Operation } : { result: data as BulkResult };
    } catch (e) {
      replace(result, h('p', { class: 'error', role: 'alert' }, `${BULK_ACTIONS[action].label} failed: ${describe(e)}`));
      return null;
    }
  }

  function showOperation(op: Operation, how: string): void {
    const a = BULK_ACTIONS[op.action];
    const skipped = Object.entries(op.skipped ?? {}).sort(([x], [y]) => x.localeCompare(y));
    const nSkipped = skipped.reduce((n, [, c]) => n + c, 0);
    const finished = op.status !== 'running';
    replace(
      result,
      h(
        'div',
        { 'data-testid': 'bulk-operation', 'data-operation': op.id, 'data-status': op.status, 'data-progress': op.progress },
        h(
          'p',
          null,
          `${how}, in the background: operation `,
          h('code', null, op.id),
          ` ${op.status}, ${op.done + nSkipped} of ${plural(op.matched, 'job')} handled `,
          h('progress', { max: 100, value: op.progress, 'aria-label': `operation ${op.id} progress` }),
          ` ${op.progress}%`,
        ),
        finished
          ? h('p', { 'data-testid': 'bulk-summary' }, `${how}: ${a.past.toLowerCase()} ${plural(op.done, 'job')}, skipped ${plural(nSkipped, 'job')}.`)
          : h('p', { class: 'muted' }, 'It goes on if this page is closed.'),
        skipped.length ? h('ul', { class: 'ids' }, skipped.map(([reason, n]) => h('li', { 'data-reason': reason }, `${plural(n, 'job')} skipped: `, h('span', { class: 'reason' }, reason)))) : null,
        op.error ? h('p', { class: 'error', role: 'alert' }, `The operation failed: ${op.error}`) : null,
      ),
    );
  }

  // follow shows op's progress until it has finished (or the panel is
  // gone from the page).
  async function follow(op: Operation, how: string): Promise<void> {
    showOperation(op, how);
    let failures = 0;
    while (op.status === 'running' && el.isConnected) {
      await new Promise((resolve) => setTimeout(resolve, OPERATION_POLL_MS));
      try {
        op = await ctx.api.get<Operation>(`/v1/admin/operations/${encodeURIComponent(op.id)}`);
        failures = 0;
      } catch (e) {
        if (++failures >= 5) {
          result.append(h('p', { class: 'error', role: 'alert' }, `Reading operation ${op.id} failed: ${describe(e)}`));
          return;
        }
        continue;
      }
      showOperation(op, how);
    }
  }

  async function run(fn: () => Promise<void>): Promise<void> {
    busy = true;
    sync();
    try {
      await fn();
    } finally {
      busy = false;
      sync();
    }
  }

  for (const action of Object.keys(BULK_ACTIONS) as BulkAction[]) {
    const a = BULK_ACTIONS[action];
    byId[action].addEventListener('click', () =>
      void run(async () => {
        confirm.hidden = true;
        const ids = opts.selected();
        const r = await call(action, { jobIds: ids });
        if (!r) return;
        show(action, r, `${a.label} of ${plural(ids.length, 'selected job')}`);
        opts.changed();
      }),
    );
    byFilter[action].addEventListener('click', () =>
      void run(async () => {
        const { filter } = opts.filter();
        if (!filter) return;
        replace(result);
        const dry = await call(action, { filter, dryRun: true });
        if (!dry) return;
        const matched = dry.matched ?? 0;
        const take = dry.jobIds?.length ?? 0;
        const go = h('button', { type: 'button', disabled: take === 0 }, `${a.label} ${plural(take, 'job')}`);
        // More than one call takes: every match, in the background.
        const every = matched > take ? h('button', { type: 'button' }, `${a.label} all ${matched} matching`) : null;
        const back = h('button', { type: 'button', class: 'secondary' }, 'Back');
        replace(
          confirm,
          h(
            'p',
            { 'data-testid': 'bulk-dry-run', 'data-matched': matched, 'data-take': take },
            `Dry run: ${plural(matched, 'job')} ${matched === 1 ? 'matches' : 'match'} the filter (${describeFilter(filter)}); `,
            take === 0 ? 'nothing to do.' : `${a.label.toLowerCase()} acts on ${take === matched ? (take === 1 ? 'it' : `all ${take}`) : `the newest ${take} (the most one call takes)`}. Nothing has changed yet.`,
          ),
          h('div', { class: 'actions' }, go, every, back),
        );
        confirm.hidden = false;
        back.addEventListener('click', () => {
          confirm.hidden = true;
          replace(confirm);
        });
        // All of them (no limit: the API acts inside the request, or starts
        // an operation when they are many), or the newest take.
        const act = (all: boolean) =>
          void run(async () => {
            go.disabled = back.disabled = true;
            if (every) every.disabled = true;
            const body = all ? { filter } : { filter, limit: Math.max(1, Math.min(take, 100)) };
            const r = await callByFilter(action, body);
            confirm.hidden = true;
            replace(confirm);
            if (!r) return;
            if (r.operation) {
              await follow(r.operation, `${a.label} by filter`);
            } else if (r.result) {
              show(action, r.result, `${a.label} by filter`);
            }
            opts.changed();
          });
        go.addEventListener('click', () => act(take === matched));
        every?.addEventListener('click', () => act(true));
      }),
    );
  }
  sync();
  return { el, sync };
}

function describeFilter(f: BulkFilter): string {
  return Object.entries(f)
    .filter(([, v]) => v)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
}
