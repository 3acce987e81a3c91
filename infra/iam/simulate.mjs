// Evaluates AWS requests against IAM policies with @cloud-copilot/iam-simulate
// (a real policy evaluator: actions, resources, wildcards, every condition
// operator, resource policies), for the IAM conformance check (docs/iam.md).
//
// stdin:  {"identityPolicies": {"<role>": [policy, …]},
//          "resourcePolicies": {"<name>": policy},
//          "requests": [{"role", "principal", "action", "resource", "account",
//                        "context": {key: value}, "resourcePolicy": "<name>"?}]}
// stdout: [{"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "Error",
//           "detail": "…"}] in the requests' order.
//
// The module is resolved from IAM_SIMULATE_MODULES (the node_modules
// directory `make iam` installs the pinned version into).
import { createRequire } from 'node:module'
import path from 'node:path'

const modules = process.env.IAM_SIMULATE_MODULES
if (!modules) {
  console.error('IAM_SIMULATE_MODULES is not set (the node_modules holding @cloud-copilot/iam-simulate)')
  process.exit(2)
}
const require = createRequire(path.join(modules, 'noop.js'))
const { runSimulation } = require('@cloud-copilot/iam-simulate')
const { loadPolicy } = require('@cloud-copilot/iam-policy')

// unvalidated evaluates a simulation as runUnsafeSimulation does (no
// context key filtering), except that it names the resource policy, which
// runUnsafeSimulation leaves unnamed and then reads the name of (0.1.173).
// It uses the engine's own modules of the pinned version.
const engine = (file) => require(path.join(modules, '@cloud-copilot/iam-simulate/dist/cjs', file))
const { authorize } = engine('core_engine/CoreSimulatorEngine.js')
const { AwsRequestImpl } = engine('request/request.js')
const { RequestContextImpl } = engine('requestContext.js')
const { DiscoveryContextKeyConstraints } = engine('context_keys/discoveryContextKeyConstraints.js')
const unvalidated = (simulation) => {
  const r = simulation.request
  const request = new AwsRequestImpl(r.principal, { resource: r.resource.resource, accountId: r.resource.accountId }, r.action,
    new RequestContextImpl(r.contextVariables))
  return authorize({
    request,
    sessionPolicy: undefined,
    identityPolicies: simulation.identityPolicies.map((p) => loadPolicy(p.policy, { name: p.name })),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    resourcePolicy: simulation.resourcePolicy ? loadPolicy(simulation.resourcePolicy, { name: 'resource-policy' }) : undefined,
    permissionBoundaries: undefined,
    vpcEndpointPolicies: undefined,
    simulationParameters: { simulationMode: 'Strict', discoveryContextKeyConstraints: new DiscoveryContextKeyConstraints([]) },
    serviceSettings: { s3: {} },
  }).result
}

const isEncryptionContextKey = (k) => k.toLowerCase().startsWith('kms:encryptioncontext:')

let raw = ''
for await (const chunk of process.stdin) raw += chunk
const input = JSON.parse(raw)

const out = []
for (const r of input.requests) {
  const policies = (input.identityPolicies[r.role] || []).map((policy, i) => ({ name: `${r.role}-${i}`, policy }))
  const simulation = {
    request: {
      principal: r.principal,
      action: r.action,
      resource: { resource: r.resource, accountId: r.account },
      contextVariables: r.context || {},
    },
    identityPolicies: policies,
    serviceControlPolicies: [],
    resourceControlPolicies: [],
  }
  if (r.resourcePolicy) simulation.resourcePolicy = input.resourcePolicies[r.resourcePolicy]
  try {
    const res = await runSimulation(simulation, {})
    if (res.resultType === 'error') {
      out.push({ result: 'Error', detail: JSON.stringify(res.errors) })
    } else if (res.resultType === 'single') {
      const ignored = res.result.ignoredContextKeys || []
      if (ignored.length && ignored.every(isEncryptionContextKey)) {
        // iam-simulate validates context keys against the action's list, and
        // matches a templated key only when its variable follows a slash
        // (aws:PrincipalTag/…), so it drops every kms:EncryptionContext:<key>
        // that kms:Decrypt and GenerateDataKey do support. The request
        // itself passed validation: evaluate it with its context as sent.
        const result = unvalidated(simulation)
        out.push({ result, detail: '' })
      } else {
        out.push({ result: res.overallResult, detail: ignored.length ? `ignored context keys: ${ignored.join(', ')}` : '' })
      }
    } else {
      out.push({ result: 'Error', detail: `unexpected result type ${res.resultType}` })
    }
  } catch (e) {
    out.push({ result: 'Error', detail: String(e && e.stack || e) })
  }
}
process.stdout.write(JSON.stringify(out))
