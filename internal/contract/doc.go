// Package contract is the host side of the code-mode guest API contract
// (0.24.4): execute_code's tool definition and handler, the `connecta`
// provider (search, describe, call, emit) over the gateway with source
// "execute_code", the host-call budget and per-call deadline (L4), the
// trusted prelude and its authenticated typed-failure frames (E1, S8, X11),
// escaped-failure matching (E6), emitted output (M1–M10), result and error
// shaping (R1–R8, E5) and the clause-tagged case table that proves them.
//
// Flow of one execution: decode input (code ≤ 128 KiB, else invalid_args) →
// supervisor admission (L7, before any scope or catalog) → one gateway Scope
// (P4) and a fresh 128-bit secret → the child runs the prelude, then the
// program; every host call arrives at host.Call on its own goroutine → the
// outcome is shaped into the response the model sees (docs/DECISIONS.md).
//
// # Clause → test
//
// What each clause id promises is in docs/contract.md (TestClauseIDsCitedAreDefined
// fails when code cites an id that page does not define).
//
// "case X" is TestContractCases/X (contract_test.go): one row of the
// clause-tagged table, run end to end (go-sdk client → HTTP /mcp → contract →
// supervisor → a real sandbox child → gateway → fixture MCP server on
// loopback that fails on demand). The table's /mcp is a minimal stateless
// go-sdk server registering only execute_code, so a row exercises this
// package alone; TestServer_ExecuteCodeThroughRealMCPEndpoint repeats the
// core path through the whole application as app.New builds it. Other names
// are top-level tests.
//
//	P1, P5      case P1_R1_OnePlusOneExactly, P1_BareBodyAndFenceAreCourtesy, P5_TypeScriptIsSyntaxError
//	P2, X5      case P2_X5_NoAmbientAuthority, P2_X5_ImportsBlocked, A2_P2_NoConnectorGlobals;
//	            TestL8_X5_DescriptionStatesBudgetsAndMissingAuthority.
//	            Dynamic Worker half: N/A: Workers-only (workerd globals and runtime modules).
//	P3, X9      case P3_X9_CycleBecomesObjectString, P3_X9_BigIntNotSerializable, P3_ArgumentsCrossAsJSON
//	P4          TestP4_NoCrossRunLeakage; case P4_OneCatalogLoadPerExecution
//	A1, A2      case A1_CanonicalAddressPunctuationPreserved, A2_P2_NoConnectorGlobals; TestA2_InventoryBoundedWholeEntries
//	S1, S1a, S2 case S1_S1a_SearchFlatPage, S1_S2_SchemaKeys (ranking and paging: internal/gateway/discovery)
//	S3          case S3_E1_LimitOutOfRangeTypedUncaught, R6_DiagnosticsKeptOnDiscoveryFailure
//	S4          case S4_DescribeOrderedMixedEntries
//	S5, S6      case S5_UnwrapStructuredTextJSONAndRawText, S5_E2_IsErrorThrowsConnectorCallFailed;
//	            TestS6_SameInvocationPathAsTopLevel, TestServer_ExecuteCodeThroughRealMCPEndpoint (program
//	            vs the server's call_tool)
//	S7          case S7_S8_ParallelAllSettledKeepsTypes
//	S8, E1, X11 case S8_E1_X11_CaughtErrorTyped, X11_ConnectorForgedFrameIsConnectorCallFailed,
//	            X11_GuestForgedFrameStaysUntyped, X11_E6_UncaughtTypedFailureNeverShowsFrame,
//	            X11_HostileHuntForBridgeAndSecret; TestS8_E1_X11_PreludeDecodesFrames (typed, promise
//	            rejection, clipped message, malformed hidden, forged untyped, refused whole),
//	            TestX11_TamperingCannotObserveOrForgeFrames, TestX11_SecretUnreachableFromGuest,
//	            TestX11_FrameRefusedWholeWhenUnboundable, TestX11_SecretIs128BitHexPerRun,
//	            TestX11_GlobalsLockedNonWritableNonConfigurable,
//	            TestE1_MessageClippedTo2000SerializedChars, TestE1_DetailsDropOptionalMetadataWhole
//	S9          case S9_ObservedOutputSchemaLabelled (inference bounds: internal/gateway/observe)
//	E2, E8      case E2_Y2_Y4_RateLimitedRetryableWithRetryAfter, E2_Y1_UnavailableOneAttempt,
//	            S5_E2_IsErrorThrowsConnectorCallFailed, E8_SchemaRejectsBeforeDispatch
//	E3, E4      case E3_AuthRequiredEnvelope, E3_MissingCredentialOperatorConfig, E4_DestructiveRefusedNeverDispatched
//	E5          TestE5_L7_AdmissionOverloadedTypedBeforeAnyCatalog (overloaded, client cancel),
//	            TestE5_M4_ShutdownMidRunReportsDiscard; case E5_EmptyErrorIsExecutorFailedFixedText,
//	            L1_L2_E5_InFlightCallCancelledWhenRunEnds; golden typed_admission, untyped_empty, executor_failed
//	E6, X8      case E6_WrappedMessageKeepsType, E6_ProgramErrorUntyped, E6_X8_UnknownMemberUntypedNoBudget,
//	            E1_E6_UncaughtToolFailureTyped; TestE6_MatchExactThenContainmentNewestFirst,
//	            TestE6_OnlyTheLast64FailuresCount, TestX8_UnknownMembersRejectWithoutHostCall
//	E7          case E7_503NamedConnectorRefusalsNotRetryable, E7_HugeUnknownAddressClamped
//	R1, R2, R3  case P1_R1_OnePlusOneExactly, R2_R3_TruncationIsSuccess, M2_M3_EmittedAfterEnvelopeStructuredStaysEnvelope
//	R4, M6, M9  verdicts; R2's guard (no get_result handle in the envelope), M1's strict typing and M2's
//	            collect-then-deliver are their enforcement
//	R5          case R5_LogsSurviveFailure, R5_X4_LogsCappedWithMarker; TestR5_LogsCappedWithTruncatedMarker
//	R6–R8       case R6_NoDiagnosticsByteIdentical, R6_R7_R8_DiagnosticsAggregatesPayloadFree,
//	            R6_DiagnosticsKeptOnDiscoveryFailure; TestR6_NoDiagnosticsIsByteForByteOrdinary;
//	            golden success_diagnostics*, untyped_diagnostics (TestR1_R6_M2_M4_E5_ResponseShapesGolden)
//	Y1, Y2, Y3  case E2_Y1_UnavailableOneAttempt, E2_Y2_Y4_RateLimitedRetryableWithRetryAfter,
//	            L4_Y2_BudgetSpentOnEntryRefusalsIncluded
//	Y4          case E2_Y2_Y4_RateLimitedRetryableWithRetryAfter (call_tool's half: internal/server/)
//	L1, L2      case L1_L2_E5_InFlightCallCancelledWhenRunEnds; TestL2_CancelledExecutionAbortsInFlightCalls,
//	            TestL2_DownstreamRequestAbortedOnCancel (the downstream sees its HTTP request end);
//	            gateway: TestL2_CancelAbortsDownstreamRequest, TestL2_CloseWithHungCallReturnsPromptly
//	L3, X1      case L3_X1_WallDeadlineNoPartialResult (Dynamic Worker's 60 s default: N/A: Workers-only)
//	L4, L8      case L4_Y2_BudgetSpentOnEntryRefusalsIncluded, L4_M7_EmitSpendsNoBudget,
//	            L4_L8_TightBudgetIsConfiguration, L4_E2_HostCallDeadlineTimeout,
//	            L7_CodeOver128KiBRefusedBeforeAdmission; TestL4_CodeOver128KiBIsInvalidArgs,
//	            TestL8_X5_DescriptionStatesBudgetsAndMissingAuthority
//	L5, L7, X2  case L5_X2_CPUBudget, L5_X2_CPUBudgetBindsOnBuiltinThatNeverPolls, L5_X2_HeapBound;
//	            TestE5_L7_AdmissionOverloadedTypedBeforeAnyCatalog (admission FIFO and queue, and
//	            TestL5_BudgetBindsOnEveryBuiltin, the hostile builtin sweep: internal/supervisor/)
//	L6, X10     case L6_X10_OverBoundResultNamesAddress, L6_OverBoundArgumentNamesNoAddress,
//	            L6_UncaughtOverBoundIsUntyped (Workers RPC limits: N/A: Workers-only)
//	V1–V4       case V1_V2_V4_OneEventPerAttemptedCall, V1_L4_BudgetRefusalRecordsNoEvent,
//	            V3_UnknownConnectorRecordedAsWrittenClamped; TestS6_SameInvocationPathAsTopLevel
//	            (friction table and clamp: internal/gateway/activity)
//	M1          case M1_InvalidEmitThrowsCatchablyNothingAccepted; TestM1_EmitRejectsEveryInvalidShape
//	M2, M3      case M2_M3_EmittedAfterEnvelopeStructuredStaysEnvelope; golden success_emitted
//	M4          case M4_FailureDiscardsVisiblyPlain, M4_FailureDiscardsVisiblyStructured;
//	            TestE5_M4_ShutdownMidRunReportsDiscard
//	M5, M7      case M5_EmitBudgetsNameRoom, L4_M7_EmitSpendsNoBudget; TestM5_EmitBudgetsFailTheCrossingBlock
//	M8          N/A: Workers-only — the row is codemode-compat's check that Cloudflare's
//	            DynamicWorkerExecutor stays assignable to the Executor type; there is no second
//	            executor here. emit being a plain provider function is exercised by the M cases.
//	M10         case M10_EmittedAggregateOnlyWhenEmitted; golden success_diagnostics
//	X3, X6      TestL2_CancelledExecutionAbortsInFlightCalls (a running child cancelled), case X6_StallFailsFast
//	X4          case X4_LogsAreStrings, R5_LogsSurviveFailure, L3_X1_WallDeadlineNoPartialResult (logs
//	            before the deadline); TestE5_M4_ShutdownMidRunReportsDiscard (logs before shutdown)
//	X7          P3's tests; the Workers superset (binary values) is deliberately unused
//
// The second arm of the original table (test/guest-api-contract.test.ts on a
// real DynamicWorkerExecutor in workerd) and test/codemode-compat.test.ts
// are N/A: Workers-only — this implementation has one executor, the QuickJS
// child, and nothing here can host workerd.
//
// Benchmarks (bench_test.go) run over HTTP against the loopback fixture:
// BenchmarkExecuteCode_OnePlusOne, BenchmarkExecuteCode_FiveCalls and
// BenchmarkExecuteCode_Clients (4 and 8 clients).
//
// The host-call helpers (argList, parseBlock, emit's add, decodeInput)
// return *gateway.Error, not error: host.reject and the response shaping
// read its code and details to frame the guest's typed failure.
package contract
