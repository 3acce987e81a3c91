// Sign in with a pasted token (locally: `go run ./cmd/conveyor token --role admin`).
// The token is checked against the overview and kept in sessionStorage only.

import { Api, claimsOf, describe, saveSession, trimBase, type Session } from '../api.js';
import { h, replace } from '../dom.js';
import type { Overview } from '../types.js';

export function loginView(root: HTMLElement, onSignedIn: (s: Session) => void, message?: string): void {
  const token = h('textarea', { id: 'token', name: 'token', rows: 4, required: true, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'token-help' });
  const apiBase = h('input', { id: 'api-base', name: 'apiBase', type: 'url', placeholder: location.origin, autocomplete: 'url' });
  const eventsBase = h('input', { id: 'events-base', name: 'eventsBase', type: 'url', placeholder: 'same as the API', autocomplete: 'url' });
  const error = h('p', { class: 'error', role: 'alert', hidden: !message }, message ?? '');
  const submit = h('button', { type: 'submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'login', 'aria-labelledby': 'login-h' },
    h('h1', { id: 'login-h' }, 'Conveyor operations'),
    h('label', { for: 'token' }, 'Access token'),
    token,
    h('p', { id: 'token-help', class: 'muted small' }, 'An admin (or, read-only, service) JWT. Locally: ', h('code', null, 'go run ./cmd/conveyor token --sub you --role admin'), '. It is kept in this tab only (sessionStorage).'),
    h(
      'details',
      null,
      h('summary', null, 'Endpoints'),
      h('label', { for: 'api-base' }, 'API URL'),
      apiBase,
      h('label', { for: 'events-base' }, 'Event stream URL'),
      eventsBase,
      h('p', { class: 'muted small' }, 'Empty: this page’s origin. In AWS the event streams are served by the stream function’s URL.'),
    ),
    error,
    submit,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.hidden = true;
    const t = token.value.trim().replace(/^Bearer\s+/i, '');
    const claims = claimsOf(t);
    if (!claims) {
      error.textContent = 'That is not a JWT (three base64url parts separated by dots).';
      error.hidden = false;
      return;
    }
    if (claims.exp && claims.exp * 1000 < Date.now()) {
      error.textContent = 'That token has expired; mint a new one.';
      error.hidden = false;
      return;
    }
    const session: Session = { token: t, apiBase: trimBase(apiBase.value), eventsBase: trimBase(eventsBase.value) };
    submit.disabled = true;
    try {
      await new Api(session).get<Overview>('/v1/admin/overview');
      saveSession(session);
      onSignedIn(session);
    } catch (err) {
      error.textContent = describe(err);
      error.hidden = false;
    } finally {
      submit.disabled = false;
    }
  });
  replace(root, form);
  token.focus();
}
