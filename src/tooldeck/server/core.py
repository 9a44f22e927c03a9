"""The core server: registries, options, capabilities, the method table, the call pipeline and lifespan services.

``Server`` is everything a transport needs to serve a deck; ``tooldeck.Deck`` (deck.py, above the transports) adds
the decorators, ``run`` and ``http_app``. The server holds no live sessions: a session subscribes to the server's
bus when it is made (``attach``) and hears list changes, resource updates and task status from there.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..prompts.registry import PromptRegistry
from ..protocol import envelope, revisions, versions
from ..protocol.cursor import CursorCodec
from ..protocol.errors import RegistrationError, set_message_cleaner
from ..resources.registry import ResourceRegistry, TemplateRegistry
from ..security.apply import apply_policy
from ..security.levels import AccessControl
from ..security.policy import Policy
from ..security.principal import Principal, local_principal
from ..tools.registry import ToolRegistry
from .backends import Backends, resolve
from .bus import Bus, MemoryBus, Subscription
from .methods import Method, method_table
from .options import ServerOptions, server_info
from .pipeline import Pipeline
from .subscriptions import Listeners

if TYPE_CHECKING:
    import asyncio

    from ..security.approvals import Approvals
    from ..security.request_state import RequestStates
    from .nodes import Nodes
    from .task_manager import TaskManager
    from .workers import WorkerPool


def _idle() -> bool:
    return False


class Server:
    """A named set of tools, resources and prompts, and how to serve them over MCP."""

    def __init__(
        self, name: str, version: str, info: dict[str, Any], options: ServerOptions, *, bus: Bus | None = None
    ) -> None:
        self.name = name
        self.version = version
        self.server_info = server_info(name, version, info)
        self.instructions: str | None = info.get("instructions")
        self.options = options
        # This process among the processes that serve the deck: unique across them, it is part of every identity that
        # crosses processes (server-to-client request ids, SSE stream and event ids, the node holding a task's lease).
        self.node_id: str = options.node_id or os.urandom(4).hex()
        # Where the state lives that must hold across processes (server/backends.py): one record, from one spec.
        self.backends: Backends = resolve(options.backends, task_store=options.task_store,
                                          keys={"request-state": options.state_key, "cursor": options.cursor_secret})  # fmt: skip
        if bus is not None:
            self.backends.bus = bus
        self.cursors = _cursor_codec(self.backends)
        self.tools = ToolRegistry()
        self.resources = ResourceRegistry()
        self.templates = TemplateRegistry()
        self.prompts = PromptRegistry()
        for kind, catalog in (("tools", self.tools), ("resources", self.resources), ("resources", self.templates),
                              ("prompts", self.prompts)):  # fmt: skip
            catalog.subscribe(functools.partial(self.changed, kind))
        self.methods: dict[str, Method] = method_table()
        self.pipeline = Pipeline(self.workers, options)
        # Security levels are enforced on every call, policy file or not (a policy only says more).
        self.policy = Policy()
        self.access = AccessControl(self.policy, ask=_confirm, ask_url=_approve_url, approvals=self.approvals)
        self.pipeline.authorizers.append(self.access)
        self.policies = self.pipeline.authorizers  # access control: async-capable steps (request, call)
        self._local_principal: Principal | None = None
        # Set by a policy (security/apply.py): the HTTP authentication backend, the routes it adds (RFC 9728
        # metadata) and that document's URL.
        self.http_auth: Any = None
        self.http_routes: dict[str, Any] = {}
        self.resource_metadata: str | None = None
        self.http_request_limit: Any = None  # [limits] http_requests: checked per HTTP request (429)
        self.http_refusal_auditor: Any = None  # [audit]: records requests the HTTP authentication refused
        self.services: list[Callable[[], Coroutine[Any, Any, None]]] = []
        """Coroutines that run beside the sessions while the server serves (a directory watcher, say): started
        when a transport's loop runs (``bind_loop``), cancelled by ``aclose``."""
        self.bus: Bus = self.backends.bus
        self.listeners = Listeners()  # the subscriptions/listen streams open here (2026-07-28)
        self.metrics: Any = None  # Prometheus metrics (metrics.py), once use_metrics() turned them on
        self.tracing: Any = None  # OpenTelemetry spans (tracing.py), once use_tracing() turned them on
        self.console: Any = None  # the operator console (console/app.py), once Deck.use_console() turned it on
        # Whether requests other than the one being served wait or run, as the serving transport tells (stdio: its
        # requests in flight; `tooldeck serve --http`: uvicorn's request tasks): the audit trail then writes the
        # records of a loop turn together instead of each at once (security/audit_sinks.py).
        self.busy: Callable[[], bool] = _idle
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: WorkerPool | None = None
        self._pending_changes: set[str] = set()
        # kind -> (the items of the list_changed being published, answers by visibility class): see sees_change
        self._announcing: dict[str, tuple[list[Any], dict[Any, bool]]] = {}
        self._init_results: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._tasks: TaskManager | None = None
        self._nodes: Nodes | None = None
        self._approvals: Approvals | None = None
        self._request_states: RequestStates | None = None
        self._running_services: list[asyncio.Task[None]] = []
        apply_policy(self, self.policy)  # the default policy: levels enforced, inputs limited, output sanitised
        set_message_cleaner(_clean_error)

    # --- what initialize answers --------------------------------------------------------------------------------

    def capabilities(self, identifies_requestor: bool = True) -> dict[str, Any]:
        """What this server offers: tools and logging always; resources, prompts, completions and tasks when it has
        them. ``tasks.list`` only where the requestor is known (stdio, or an authenticated principal): otherwise
        listing would show every unbound task to anyone."""
        capabilities: dict[str, Any] = {"logging": {}, "tools": {"listChanged": True}}
        if any(t.task_support != "forbidden" for t in self.tools):
            capabilities["tasks"] = {"cancel": {}, "requests": {"tools": {"call": {}}}}
            if identifies_requestor:
                capabilities["tasks"]["list"] = {}
        if len(self.resources) or len(self.templates):
            capabilities["resources"] = {"subscribe": True, "listChanged": True}
        if len(self.prompts):
            capabilities["prompts"] = {"listChanged": True}
        if any(p.completers for p in self.prompts) or any(t.completers for t in self.templates):
            capabilities["completions"] = {}
        return capabilities

    def initialize_result(self, protocol_version: str, identifies_requestor: bool = True) -> dict[str, Any]:
        key = (protocol_version, identifies_requestor)
        cached = self._init_results.get(key)  # emptied whenever a registry changes
        if cached is None:
            capabilities = self.capabilities(identifies_requestor)
            if versions.is_modern(protocol_version):  # tasks are the tasks extension's there (task_extension.py)
                offered = capabilities.pop("tasks", None) is not None
                capabilities["extensions"] = {envelope.TASKS_EXTENSION: {}} if offered else {}
            cached = {
                "protocolVersion": protocol_version,
                "capabilities": capabilities,
                "serverInfo": self.server_info,
            }
            if self.instructions is not None:
                cached["instructions"] = self.instructions
            cached = revisions.initialize_result(cached, protocol_version)  # what that revision defines, no more
            self._init_results[key] = cached
        return cached

    def cached(self, key: tuple[Any, ...], make: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        """A result made from what is registered (a server/discover answer, say): ``make(*args)`` once per ``key``,
        forgotten with the initialize results whenever a registry or the policy changes."""
        found = self._init_results.get(key)
        if found is None:
            found = self._init_results[key] = make(*args)
        return found

    def request_states(self) -> RequestStates:
        """What seals and opens the ``requestState`` of 2026-07-28 input-required results (made on first use): under
        the key ring's request-state key (``state_key``, else ``$TOOLDECK_STATE_KEY``, else a random key of this
        process), spending single-use states in the backends' spent store."""
        if self._request_states is None:
            from ..security.request_state import RequestStates

            backends = self.backends
            self._request_states = RequestStates(backends.keys.key("request-state"), spent=backends.spent)
        return self._request_states

    def use_metrics(self) -> Any:
        """Turn Prometheus metrics on (``tooldeck serve --metrics``; needs ``tooldeck[metrics]``): the ``Metrics``
        (server/metrics.py), made once; an HTTP app serves them at its metrics path."""
        if self.metrics is None:
            self.metrics = _optional("metrics", "Metrics", "prometheus-client", self)
            self.metrics.watch(self.backends)
        return self.metrics

    def use_tracing(self, provider: Any = None) -> Any:
        """Turn OpenTelemetry spans on (``tooldeck serve --tracing``; needs ``tooldeck[tracing]``), from
        ``provider`` (a ``TracerProvider``; the global one, as the SDK or ``opentelemetry-instrument`` set it up,
        when None): the ``Tracing`` (server/tracing.py), made once."""
        if self.tracing is None:
            self.tracing = _optional("tracing", "Tracing", "the OpenTelemetry API", provider)
        return self.tracing

    def use_backends(self, backends: Backends | str) -> None:
        """Keep the deck's state in ``backends`` (a record or a spec, see server/backends.py) from now on: what
        ``tooldeck serve --backend`` does to a deck it loaded. Only before the deck serves: sessions, tasks and
        streams already made stay where they are. A policy applied before is applied again, so its rate limits take
        from the new limiter."""
        if self._tasks is not None or self._loop is not None:
            raise RuntimeError("use_backends: the deck is serving already; choose its backends before it serves")
        options = self.options
        found = resolve(backends, task_store=None,
                        keys={"request-state": options.state_key, "cursor": options.cursor_secret})  # fmt: skip
        if found.tasks is None:
            found.tasks = self.backends.tasks
        self.backends = found
        if self.metrics is not None:
            self.metrics.watch(found)
        self.bus = found.bus
        self.cursors = _cursor_codec(found)
        self._request_states = None
        if getattr(self, "_security", None) is not None:
            apply_policy(self, self.policy)

    def use_policy(self, policy: Policy) -> None:
        """Serve under ``policy`` (security levels' defaults and verification, roles, the stdio principal); the deck's
        ``apply_policy`` also installs its authentication, limits, sanitiser and audit."""
        self.policy = policy
        self.access.policy = policy
        self._local_principal = None
        self._init_results.clear()
        for catalog in (self.tools, self.resources, self.templates, self.prompts):
            catalog.forget_views()  # a view's visibility class is read under a policy (its default level, say)

    def local_principal(self) -> Principal | None:
        """Who a stdio (or in-process) session is: the holder of ``$TOOLDECK_TOKEN`` when the policy lists that API
        key (the spec has stdio take credentials from the environment), else the local user with the policy's
        ``[authentication.stdio]`` scopes and roles. A ``$TOOLDECK_TOKEN`` the policy does not know: anonymous."""
        if self._local_principal is None:
            authentication = self.policy.authentication
            token = os.environ.get("TOOLDECK_TOKEN")
            if token and authentication.get("tokens"):
                from ..security.tokens import StaticTokens

                found = StaticTokens(authentication["tokens"]).lookup(token)
                if found is None:
                    logging.getLogger("tooldeck.security").warning("$TOOLDECK_TOKEN is not a key of the policy: "
                                                                   "this session is anonymous")  # fmt: skip
                    return None
                self._local_principal = Principal(found.subject, scopes=found.scopes, roles=found.roles)
            else:
                self._local_principal = local_principal(authentication.get("stdio"))
        return self._local_principal

    # --- lifespan services --------------------------------------------------------------------------------------

    def task_manager(self) -> TaskManager:
        """The TaskManager (created on first use, over the backends' task store, in memory if none was chosen)."""
        if self._tasks is None:
            from .task_manager import TaskManager

            options = self.options
            self._tasks = TaskManager(
                self.pipeline,
                self.bus,
                self.cursors,
                options.page_size,
                self.backends.tasks,
                default_ttl_ms=int(options.task_ttl * 1000),
                max_ttl_ms=int(options.max_task_ttl * 1000),
                max_active=options.max_tasks_per_requestor,
                server=self,
                lease=options.task_lease,
                renewal=options.task_lease_renewal,
            )
        return self._tasks

    @property
    def nodes(self) -> Nodes:
        """This process's end of the calls between the processes of a fleet (server/nodes.py), made on first use."""
        if self._nodes is None:
            from .nodes import Nodes

            self._nodes = Nodes(self.bus, self.node_id)
        return self._nodes

    def approvals(self) -> Approvals:
        """The calls waiting for a person's decision (security/approvals.py), over the backends' store, made on first
        use; with shared backends, decisions reach them from other processes over ``nodes`` (approval_relay.py)."""
        found = self._approvals
        if found is None or found.store is not self.backends.approvals:
            from .approval_relay import approvals_over

            shared = self.nodes if self.backends.shared else None
            found = self._approvals = approvals_over(self.backends.approvals, self.node_id, shared)
        return found

    def workers(self) -> WorkerPool:
        """The worker pool sync functions run in (created when the first one runs)."""
        if self._workers is None:
            from .workers import WorkerPool

            self._workers = WorkerPool(self.options.max_threads)
        return self._workers

    async def aclose(self) -> None:
        """Stop the lifespan services: running tasks are cancelled, the task store closed, the workers released."""
        self.listeners.end_all()  # listen streams still open get their closing result
        if self._tasks is not None:  # first: the runs it stops are recorded while the audit trail (a service) is open
            await self._tasks.aclose()
            self._tasks = None
        running, self._running_services = self._running_services, []
        for service in running:
            service.cancel()
        for service in running:
            try:
                await service
            except BaseException:  # cancelled, or failed (and logged by _service_done)
                pass
        if self._nodes is not None:
            self._nodes.close()
            self._nodes = None
        if self._workers is not None:
            self._workers.close()
            self._workers = None
        await self.backends.aclose()

    # --- sessions and the bus -----------------------------------------------------------------------------------

    def attach(self, session: Any) -> tuple[Subscription, ...]:
        """Subscribe a new session to what the server announces; it cancels the subscriptions when it closes."""
        if self._loop is None or self._loop.is_closed():
            self._loop = _running_loop()  # None for a session driven without a loop: changes are then sent at once
        bus = self.bus
        return (
            bus.subscribe("list_changed", session.list_changed),
            bus.subscribe("resource_updated", session.resource_updated),
            bus.subscribe(f"session/{session.key}", session.deliver),
        )

    async def open_backends(self) -> None:
        """Make the backends ready (server/backends.py: reach a shared server, settle the shared keys), then sign
        with the keys they settled: a transport awaits it once its loop runs, before it serves."""
        backends = self.backends
        await backends.open()
        self.cursors = CursorCodec(backends.keys.key("cursor"))
        self._request_states = None

    def bind_loop(self) -> None:
        """Announce changes made from other threads on the running loop from now on, and start the services (a
        transport calls this once its loop runs)."""
        self._loop = loop = _running_loop()
        if loop is not None:
            self.start_services(loop)

    def start_services(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the services not started yet (all of them at first; one a reloaded policy added, later). A
        service taken out of ``services`` (a policy's audit trail, replaced) is cancelled: it closes what it kept."""
        running = {getattr(task, "service", None): task for task in self._running_services}
        for service, task in running.items():
            if service not in self.services:
                task.cancel()
                self._running_services.remove(task)
        for service in self.services:
            if service not in running:
                task = loop.create_task(service())
                task.service = service  # type: ignore[attr-defined]
                task.add_done_callback(_service_done)
                self._running_services.append(task)

    def readable_item(self, uri: str) -> Any:
        """The resource ``uri`` names, or the template it matches; None if neither."""
        item: Any = self.resources.get(uri)
        if item is None:
            found = self.templates.match(uri)
            item = None if found is None else found[0]
        return item

    def may_read(self, principal: Any, uri: str, under: str | None = None) -> bool:
        """Whether ``principal`` may read the resource ``uri`` (what resource updates are sent on); a URI that names
        no resource of its own (an entry of a directory, say) is read through ``under``, the one it is under."""
        item = self.readable_item(uri)
        if item is None and under is not None:
            item = self.readable_item(under)
        return item is not None and self.access.can_use(principal, item)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the clients that subscribed to ``uri`` (or to a resource it is under) that it changed.

        Safe to call from any thread; sends notifications/resources/updated only to subscribers.
        """
        loop = self._loop
        if loop is not None and not loop.is_closed() and _running_loop() is not loop:
            loop.call_soon_threadsafe(self.bus.publish, "resource_updated", uri)
        else:
            self.bus.publish("resource_updated", uri)

    def changed(self, kind: str) -> None:
        """A registry of ``kind`` changed: one list_changed per burst of changes, published on the loop's thread."""
        self._init_results.clear()  # capabilities may change with what is registered
        bus = self.bus
        if isinstance(bus, MemoryBus) and not bus.subscribers("list_changed"):  # a shared bus may have them elsewhere
            for catalog in self._catalogs(kind):
                catalog.take_changes()  # no one to tell: the next announcement counts from here
            return
        loop = self._loop
        if loop is None or loop.is_closed():
            self._pending_changes.add(kind)
            self._announce()
            return
        if kind in self._pending_changes:
            return
        self._pending_changes.add(kind)
        if _running_loop() is loop:
            loop.call_soon(self._announce)
        else:
            loop.call_soon_threadsafe(self._announce)

    def _announce(self) -> None:
        kinds, self._pending_changes = self._pending_changes, set()
        for kind in sorted(kinds):
            changed = [item for catalog in self._catalogs(kind) for item in catalog.take_changes()]
            if not changed:
                continue  # changed and changed back within the burst: the lists are as they were
            self._announcing[kind] = (changed, {})
            try:
                self.bus.publish("list_changed", kind)
            finally:
                del self._announcing[kind]

    def sees_change(self, kind: str, principal: Any) -> bool:
        """Whether the ``kind`` list_changed being published changed what ``principal`` is listed: a session or a
        listen stream that cannot see any of the items that changed (under ``hide_unusable``) is not told. A
        publication this process did not make (another process's, on a shared bus) is told to everyone."""
        announcing = self._announcing.get(kind)
        if announcing is None:
            return True
        changed, memo = announcing
        return self.access.sees_any(principal, changed, memo)

    def _catalogs(self, kind: str) -> tuple[Any, ...]:
        """The registries a ``kind`` list_changed speaks for (``resources`` covers the resource templates too)."""
        if kind == "tools":
            return (self.tools,)
        if kind == "prompts":
            return (self.prompts,)
        return (self.resources, self.templates)


def _clean_error(message: str) -> str:
    from ..security.sanitise import clean_error  # loaded by the first error message that needs it

    return clean_error(message)


async def _confirm(request: Any, call: Any, message: str, schema: dict[str, Any], timeout: float) -> Any:
    """How the access control asks the user to confirm a call (levels 8-10): a form elicitation in the call."""
    from .context import Context

    return await Context(request, call.name, None).elicit(message, schema, timeout=timeout)


def _optional(feature: str, name: str, library: str, *args: Any) -> Any:
    """``server/<feature>.py``'s ``name`` made with ``args``: a feature whose library is an optional extra
    (``tooldeck[<feature>]``); RegistrationError saying what to install when it is missing."""
    import importlib

    try:
        return getattr(importlib.import_module(f"{__package__}.{feature}"), name)(*args)
    except ImportError as exc:
        raise RegistrationError(f"{feature} needs {library}: pip install 'tooldeck[{feature}]' ({exc})") from None


async def _approve_url(request: Any, call: Any, message: str, url: str, elicitation_id: str, timeout: float,
                       key: str | None = None) -> Any:  # fmt: skip
    """How the access control sends the user to the approval page (``[levels] approval = "url"``): a URL-mode
    elicitation in the call (``key``: its input request's, in a 2026-07-28 round)."""
    from .context import Context

    return await Context(request, call.name, None).elicit_url(message, url, elicitation_id=elicitation_id,
                                                             timeout=timeout, key=key)  # fmt: skip


def _cursor_codec(backends: Backends) -> CursorCodec:
    """Cursors signed with the backends' cursor key; until a shared ring is open (``open_backends``, before the deck
    serves) a key of this process's own, which nothing served ever used."""
    try:
        return CursorCodec(backends.keys.key("cursor"))
    except RuntimeError:
        return CursorCodec(os.urandom(32))


def _service_done(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        import logging

        logging.getLogger("tooldeck.server").error("a service stopped: %r", task.exception(), exc_info=task.exception())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    asyncio = sys.modules.get("asyncio")  # no loop can be running if asyncio was never imported
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
