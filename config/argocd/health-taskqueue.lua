-- Argo CD health of a TaskQueue (batch.taskops.io). Install it as
-- resource.customizations.health.batch.taskops.io_TaskQueue in argocd-cm
-- (docs/gitops.md).
local hs = {}
local ready = nil
if obj.status ~= nil and obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" then
      ready = c
    end
  end
end
if ready == nil or obj.status.observedGeneration == nil or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to see the newest spec"
  return hs
end
if ready.reason == "QueueSuspended" then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true: the queue admits nothing"
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
