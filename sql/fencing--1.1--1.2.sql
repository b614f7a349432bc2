/* fencing--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-- Tokens bound as strings.  JDBC's setString() binds varchar, and other
-- drivers bind text: an assignment cast from both lets such a parameter
-- be stored in a token column (INSERT, UPDATE SET tok = $1) as a literal
-- can.  Not implicit: in a function call (fence_use(resource, $2)) or a
-- comparison a string would then match the text overloads of other
-- functions and operators as well, and be ambiguous.  The I/O conversion
-- checks the token's syntax and range.
CREATE CAST (text AS @extschema@.fence_token) WITH INOUT AS ASSIGNMENT;
CREATE CAST (varchar AS @extschema@.fence_token) WITH INOUT AS ASSIGNMENT;
