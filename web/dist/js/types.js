// The shapes of the API's answers (shared/API.md), as far as the dashboard reads them.
export const JOB_STATUSES = ['scheduled', 'queued', 'running', 'succeeded', 'failed', 'cancelled', 'stale'];
export const TIERS = ['high', 'medium', 'low', 'system'];
