/**
 * The job browser's script (`dynein ui`, served as `app.js` below the run's token): it reads the
 * server's config, builds the tenant picker, wires the page's controls and starts the live
 * refresh. No framework: the DOM of client/ui/page.ts, filled with text only. esbuild bundles it
 * (client/ui/bundleOptions.mjs); tsconfig.browser.json type-checks it against the DOM.
 */
import type { UiConfig } from '../uiConfig.js';
import type { DeadLetter } from './apiTypes.js';
import { closeEditor, openEditor, saveEdit, toggleEdits } from './deadLetterEdits.js';
import { deleteTicked, redrive, tickAll } from './deadLetters.js';
import { $, el, fieldValue, on, showMessage } from './dom.js';
import { cancelJob, closeJob, loadJob, openJob } from './job.js';
import { cancelByKey, cancelByTag, loadJobs, nextPage, previousPage, showFilteredJobs } from './jobs.js';
import { showLiveLabel } from './liveLabel.js';
import { showTab, showTenant, tick } from './live.js';
import { loadSchedules } from './schedules.js';
import { state, type Tab } from './state.js';
import { openWorkflow } from './workflow.js';

/**
 * The tenant picker: the local stack's tenants in a select; for a deployed API, whose tenants the
 * server cannot list, a text field with those given on the command line as suggestions.
 */
function tenantPicker(config: UiConfig): HTMLInputElement | HTMLSelectElement {
  if (config.local) {
    const picker = el(
      'select',
      { id: 'tenant' },
      config.tenants.map((t) => el('option', { value: t, text: t })),
    );
    picker.value = config.tenant;
    return picker;
  }
  $('#tenant-slot').append(
    el(
      'datalist',
      { id: 'tenant-list' },
      config.tenants.map((t) => el('option', { value: t })),
    ),
  );
  return el('input', { id: 'tenant', list: 'tenant-list', size: '14', value: config.tenant, placeholder: 'tenant' });
}

function wireHeader(config: UiConfig): void {
  $('#where').textContent = `${config.local ? 'local stack ' : 'API '}${config.endpoint}`;
  const picker = tenantPicker(config);
  picker.addEventListener('change', () => {
    const tenant = picker.value.trim();
    if (tenant) showTenant(tenant);
  });
  $('#tenant-slot').append(picker);
  on('#pause', 'click', () => {
    state.paused = !state.paused;
    showLiveLabel();
  });
  for (const button of document.querySelectorAll('nav button'))
    button.addEventListener('click', () => void showTab(button.getAttribute('data-tab') as Tab));
}

function wireJobs(): void {
  on('#filters', 'submit', (e) => {
    e.preventDefault();
    void showFilteredJobs();
  });
  on('#open', 'submit', (e) => {
    e.preventDefault();
    const jobId = fieldValue($<HTMLFormElement>('#open'), 'jobId').trim();
    if (jobId) void openJob(jobId);
  });
  on('#cancel-tag', 'click', () => void cancelByTag());
  on('#cancel-key', 'click', () => void cancelByKey());
  on('#prev', 'click', previousPage);
  on('#next', 'click', nextPage);
  on('#cancel', 'click', () => void cancelAndReload());
  on('#detail-close', 'click', closeJob);
}

/** Cancels the open job, then shows its new state, in the panel and in the list. */
async function cancelAndReload(): Promise<void> {
  if (await cancelJob()) await Promise.all([loadJob(), loadJobs()]);
}

function wireWorkflows(): void {
  on('#open-workflow', 'submit', (e) => {
    e.preventDefault();
    const workflowId = fieldValue($<HTMLFormElement>('#open-workflow'), 'workflowId').trim();
    if (workflowId) void openWorkflow(workflowId);
  });
  // A job of the graph clicked: its detail in the Jobs tab.
  window.addEventListener('dynein:open-job', (e) => {
    const jobId = (e as CustomEvent<string>).detail;
    void showTab('jobs').then(() => openJob(jobId));
  });
}

function wireSchedulesAndDeadLetters(): void {
  on('#schedules-more', 'click', () => void loadSchedules(true));
  on('#redrive-all', 'click', () => void redrive(true));
  on('#redrive-selected', 'click', () => void redrive(false));
  on('#delete-selected', 'click', () => void deleteTicked());
  on('#dlq-all', 'change', () => tickAll($<HTMLInputElement>('#dlq-all').checked));
  // A row's Edit (deadLetters.ts): its payload in the editor.
  window.addEventListener('dynein:edit-dead-letter', (e) => openEditor((e as CustomEvent<DeadLetter>).detail));
  on('#dlq-edit', 'submit', (e) => {
    e.preventDefault();
    void saveEdit();
  });
  on('#dlq-edit-cancel', 'click', closeEditor);
  on('#dlq-edits-show', 'click', () => void toggleEdits());
}

async function start(): Promise<void> {
  const config = (await (await fetch('ui/config')).json()) as UiConfig;
  state.refreshMs = config.refreshMs;
  wireHeader(config);
  wireJobs();
  wireSchedulesAndDeadLetters();
  wireWorkflows();
  if (config.tenant) showTenant(config.tenant);
  else showMessage('#jobs-msg', 'info', 'Pick a tenant.');
  setInterval(tick, config.refreshMs);
}

void start();
