// The settings the extension sends flemmad, trusted workspace or not (src/trust.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configurationChange, serverSettings } from '../src/trust';

test('a trusted workspace sends flemma.config unchanged', () => {
  const config = { provider: 'openai', trust: { paths: ['~/notes/**'] } };
  assert.equal(serverSettings(config, true), config);
});

test('Restricted Mode adds trust.restricted, keeping the rest', () => {
  assert.deepEqual(serverSettings({}, false), { trust: { restricted: true } });
  const config = { model: 'gpt-5', trust: { paths: ['~/notes/**'], restricted: false } };
  assert.deepEqual(serverSettings(config, false), {
    model: 'gpt-5',
    trust: { paths: ['~/notes/**'], restricted: true },
  });
  assert.deepEqual(config.trust.restricted, false, 'the user setting itself is not changed');
  assert.deepEqual(serverSettings({ trust: 'nonsense' }, false), { trust: { restricted: true } });
});

test('a change carries the settings where the server reads them', () => {
  assert.deepEqual(configurationChange({ model: 'x' }), { settings: { flemma: { config: { model: 'x' } } } });
});
