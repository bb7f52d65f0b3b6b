-- Argo CD health of a Task (batch.taskops.io). Install it as
-- resource.customizations.health.batch.taskops.io_Task in argocd-cm
-- (docs/gitops.md). Without it Argo CD calls a Task Healthy as soon as it
-- exists, so a sync wave would not wait for a migration Task, nor show
-- one that failed.
local hs = {}
local function condition(t)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == t then
      return c
    end
  end
  return nil
end

local ready = condition("Ready")
if ready == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to see the newest spec"
  return hs
end
local failed, stalled = condition("Failed"), condition("Stalled")
if (failed ~= nil and failed.status == "True") or (stalled ~= nil and stalled.status == "True") then
  hs.status = "Degraded"
  hs.message = ready.reason .. ": " .. (ready.message or "")
  return hs
end
if ready.reason == "Suspended" then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true"
  return hs
end
if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ready.reason
  return hs
end
hs.status = "Progressing"
hs.message = ready.reason .. ": " .. (ready.message or "")
return hs
