-- A small Nsight Systems SQLite export, written by hand from the Nsight Systems "SQLite Schema
-- Reference" (the tables and columns xfprof reads, with a few others beside them), not from a
-- GPU run: one thread (globalTid 100) with NVTX ranges "decode_step" > "layer0.attention" and
-- "layer0.mlp", two decode steps, kernels launched by cudaLaunchKernel; one kernel launched outside
-- every range. Times in nanoseconds. tests/test_import.c and tests/cli_import.sh build the database
-- from this file.
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
  contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER, gridY INTEGER,
  gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
  globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
  category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
  domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
  int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
INSERT INTO StringIds VALUES (1, 'flash_fwd_kernel'), (2, 'sm90_gemm_bf16'), (3, 'rms_norm_kernel'),
  (4, 'cudaLaunchKernel'), (5, 'layer0.mlp'), (6, 'memset_kernel');
-- step 1: decode_step [0, 100000], attention [1000, 40000], mlp (text through textId) [41000, 90000]
INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, textId) VALUES
  (0, 100000, 59, 'decode_step', 100, NULL), (1000, 40000, 59, 'layer0.attention', 100, NULL),
  (41000, 90000, 59, NULL, 100, 5),
  (200000, 300000, 59, 'decode_step', 100, NULL), (201000, 240000, 59, 'layer0.attention', 100, NULL),
  (241000, 290000, 59, NULL, 100, 5),
  (150000, NULL, 34, 'a mark, not a range', 100, NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, correlationId, nameId, returnValue) VALUES
  (2000, 3000, 1, 100, 11, 4, 0), (5000, 6000, 1, 100, 12, 4, 0), (42000, 43000, 1, 100, 13, 4, 0),
  (95000, 96000, 1, 100, 14, 4, 0), (202000, 203000, 1, 100, 21, 4, 0), (242000, 243000, 1, 100, 23, 4, 0),
  (400000, 401000, 1, 100, 31, 4, 0);
-- kernels: rms_norm 4 us and flash 10 us in attention; gemm 20 us in mlp; a gemm 5 us launched in
-- decode_step outside both layers; step 2: flash 12 us, gemm 22 us; a memset 1 us outside every range.
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, correlationId, globalPid,
  demangledName, shortName) VALUES
  (10000, 14000, 0, 1, 7, 11, 1, 3, 3), (15000, 25000, 0, 1, 7, 12, 1, 1, 1), (50000, 70000, 0, 1, 7, 13, 1, 2, 2),
  (97000, 102000, 0, 1, 7, 14, 1, 2, 2), (210000, 222000, 0, 1, 7, 21, 1, 1, 1), (250000, 272000, 0, 1, 7, 23, 1, 2, 2),
  (402000, 403000, 0, 1, 7, 31, 1, 6, 6);
