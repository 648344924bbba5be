"""The agent layer: models (scripted and real), the runner loop, permissions and audit."""

from agent17.agent.models import (
    Message,
    Model,
    ModelReply,
    ScriptedModel,
    ScriptedTask,
    ToolCall,
    UnexpectedModelCall,
    lead_script,
    minimal_scenario_lead_script,
    teammate_script,
)
from agent17.agent.permissions import (
    ApprovalRequest,
    AuditTrail,
    Decision,
    PermissionPolicy,
    teammate_policy,
    terminal_approver,
)
from agent17.agent.runner import AgentRunner, IdempotencyLedger, RunResult, ToolCallRecord

__all__ = [
    "AgentRunner",
    "ApprovalRequest",
    "AuditTrail",
    "Decision",
    "IdempotencyLedger",
    "Message",
    "Model",
    "ModelReply",
    "PermissionPolicy",
    "RunResult",
    "ScriptedModel",
    "ScriptedTask",
    "ToolCall",
    "ToolCallRecord",
    "UnexpectedModelCall",
    "lead_script",
    "minimal_scenario_lead_script",
    "teammate_policy",
    "teammate_script",
    "terminal_approver",
]
